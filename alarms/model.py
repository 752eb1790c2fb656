"""The vocabulary of the alarm layer: keys, settings, states, inputs, operator actions, transitions, refusals.

The states follow ISA-18.2 / IEC 62682. Two things are tracked separately for every alarm:

* the **phase**: what the operator sees of the process (normal, active-unacknowledged, active-acknowledged,
  returned-to-normal-unacknowledged, and for latched alarms latched-unacknowledged / latched-acknowledged,
  meaning "the condition has gone but the alarm is held until an operator resets it");
* the **mode**: in service, shelved (by an operator, with a reason and an expiry) or out of service (for
  maintenance, until put back). A shelved or out-of-service alarm annunciates nothing; its condition is still
  followed, so putting it back in service raises it at once if the condition is still present.

The display state (`AlarmState.state`) is the mode when not in service, otherwise the phase.

Times are float seconds since the Unix epoch, UTC, on the daemon's clock (the ``now`` passed to the state
machine); all durations are seconds. Alarm settings never alter the exceedance episodes: delays and deadband
decide only when the *alarm* follows the episode, the episode record stays as the check engine wrote it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import StrEnum
from itertools import pairwise
from typing import Any


class Priority(StrEnum):
    """How urgently an operator must respond. ``diagnostic`` suits data-quality alarms (stale, faults)."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    DIAGNOSTIC = "diagnostic"


class State(StrEnum):
    """Display states. The first six are phases; the last two are modes that hide the phase."""

    NORMAL = "normal"
    ACTIVE_UNACKED = "active-unacknowledged"
    ACTIVE_ACKED = "active-acknowledged"
    RTN_UNACKED = "returned-to-normal-unacknowledged"
    LATCHED_UNACKED = "latched-unacknowledged"  # condition gone, held until reset, not yet acknowledged
    LATCHED_ACKED = "latched-acknowledged"  # condition gone, held until reset, acknowledged
    SHELVED = "shelved"
    OUT_OF_SERVICE = "out-of-service"

    @property
    def unacknowledged(self) -> bool:
        return self in (State.ACTIVE_UNACKED, State.RTN_UNACKED, State.LATCHED_UNACKED)


PHASES = frozenset(
    {State.NORMAL, State.ACTIVE_UNACKED, State.ACTIVE_ACKED, State.RTN_UNACKED, State.LATCHED_UNACKED,
     State.LATCHED_ACKED}
)


class Mode(StrEnum):
    IN_SERVICE = "in-service"
    SHELVED = "shelved"
    OUT_OF_SERVICE = "out-of-service"


class Kind(StrEnum):
    """What a transition is. Notifiers announce RAISE, REALARM and ESCALATE; the rest inform."""

    RAISE = "raise"  # the alarm became active and needs acknowledgement
    CLEAR = "clear"  # the condition went away (to normal, or to returned-to-normal-unacknowledged)
    LATCH = "latch"  # the condition went away on a latched alarm: held until an operator resets it
    ACK = "ack"
    RESET = "reset"  # an operator released a latched alarm
    SHELVE = "shelve"
    UNSHELVE = "unshelve"
    SHELVE_EXPIRED = "shelve-expired"
    OUT_OF_SERVICE = "out-of-service"
    IN_SERVICE = "in-service"
    REALARM = "realarm"  # reminder: still active and unacknowledged after the re-alarm interval
    ESCALATE = "escalate"  # unacknowledged too long: notify the next recipient level (``level``)


SYSTEM = "system"  # the ``who`` of every transition the daemon makes on its own


@dataclass(frozen=True, slots=True, order=True)
class AlarmKey:
    """One alarm per configured rule × channel at a site. ``id`` ("site/channel/rule") is stable across
    restarts and is what operators, the CLI and the plant's SCADA name."""

    site: str
    channel: str
    rule: str

    def __post_init__(self) -> None:
        for part in (self.site, self.channel, self.rule):
            if not part or "/" in part:
                raise ValueError(f"alarm key parts must be non-empty and contain no '/': {part!r}")

    @property
    def id(self) -> str:
        return f"{self.site}/{self.channel}/{self.rule}"

    @classmethod
    def parse(cls, alarm_id: str) -> AlarmKey:
        parts = alarm_id.split("/")
        if len(parts) != 3:
            raise ValueError(f"an alarm id is site/channel/rule, got {alarm_id!r}")
        return cls(*parts)


@dataclass(frozen=True, slots=True)
class AlarmSettings:
    """Per-alarm settings (configured per rule, possibly per site). Times in seconds; 0 turns a feature off.

    ``on_delay``: the condition must persist this long before the alarm activates (an episode shorter than
    this never alarms). ``off_delay``: the condition must stay away this long before the alarm clears (a
    brief dip back inside the limit does not clear and re-raise). ``deadband``: in the value's unit; the
    alarm clears only once the value is at least this far from the limit (|value − limit| ≥ deadband). It
    needs both a value and a limit: an input lacking either is not held by it, and an alarm held by it stays
    active until an input with a value far enough away arrives (so the daemon must keep feeding values to
    held alarms, see `AlarmState.held`). ``realarm_interval``: reminder period while the alarm is active (or
    latched) and unacknowledged. ``escalate_after``: seconds unacknowledged after which the alarm escalates
    to level 2, 3, … (strictly increasing; one entry per extra level).
    """

    priority: Priority = Priority.HIGH
    latched: bool = False
    on_delay: float = 0.0
    off_delay: float = 0.0
    deadband: float = 0.0
    realarm_interval: float = 0.0
    escalate_after: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("on_delay", "off_delay", "deadband", "realarm_interval"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"alarm setting {name} must be a finite number ≥ 0, got {v!r}")
        steps = self.escalate_after
        if any(not math.isfinite(s) or s <= 0 for s in steps) or any(b <= a for a, b in pairwise(steps)):
            raise ValueError(f"escalate_after must be strictly increasing positive seconds, got {steps!r}")


@dataclass(frozen=True, slots=True)
class AlarmInput:
    """The alarm's condition as reported at ``time`` (epoch s UTC, the event's own time): an exceedance
    episode or data-quality episode has started (``active=True``) or ended (``active=False``).

    ``value`` is the reading that started/ended it (None for data-quality conditions with no reading),
    ``limit`` the limit it was judged against, ``citation`` the ordinance or permit section. The daemon
    adapts the check engine's episode events to this; repeating an input (e.g. a "start" for an alarm that
    was already active before a restart) changes nothing.
    """

    time: float
    site: str
    channel: str
    rule: str
    active: bool
    value: float | None = None
    limit: float | None = None
    citation: str = ""
    reason: str = ""  # why, when it is not the episode's own edge (a revision: "late reading: ...")
    retracted: bool = False  # an "end" saying the episode never happened: a latched alarm is not held for it

    def __post_init__(self) -> None:
        for name in ("value", "limit"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"alarm input {name} must be finite or None, got {v!r}")

    @property
    def key(self) -> AlarmKey:
        return AlarmKey(self.site, self.channel, self.rule)

    def to_payload(self) -> dict[str, Any]:
        return {"alarm": self.key.id, "site": self.site, "channel": self.channel, "rule": self.rule,
                "event": "start" if self.active else "end", "time": self.time, "value": self.value,
                "limit": self.limit, "citation": self.citation, **({"reason": self.reason} if self.reason else {}),
                **({"retracted": True} if self.retracted else {})}


# ---- operator actions ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Ack:
    user: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Shelve:
    """Shelve until ``until`` (epoch s); ``reason`` is mandatory (ISA-18.2: shelving is recorded with why)."""

    user: str
    until: float
    reason: str


@dataclass(frozen=True, slots=True)
class Unshelve:
    user: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Reset:
    """Release a latched alarm whose condition has gone; resetting an unacknowledged one acknowledges it."""

    user: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class OutOfService:
    user: str
    reason: str


@dataclass(frozen=True, slots=True)
class InService:
    user: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Seen:
    """An industry's acknowledgement: the discharger has seen the alarm. Journaled with its user and note;
    the alarm's state is untouched, because only the plant side acknowledges, shelves and resets a plant
    alarm (an industry clicking "acknowledge" must not silence the operator's alarm)."""

    user: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Comment:
    """A remark on an alarm (who, when, text), journaled like every other action; no state change."""

    user: str
    note: str


Action = Ack | Shelve | Unshelve | Reset | OutOfService | InService | Seen | Comment

ACTION_NAMES: dict[type, str] = {Ack: "ack", Shelve: "shelve", Unshelve: "unshelve", Reset: "reset",
                                 OutOfService: "out-of-service", InService: "in-service", Seen: "seen",
                                 Comment: "comment"}


def action_payload(action: Action) -> dict[str, Any]:
    """The journal form of an operator action: its name and every field."""
    out: dict[str, Any] = {"action": ACTION_NAMES[type(action)]}
    out.update({f.name: getattr(action, f.name) for f in fields(action)})
    return out


# ---- outputs ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Transition:
    """One change of an alarm, as journaled and as handed to the delivery layer.

    ``who`` is the operator's user name or ``"system"``; ``why`` is the operator's note or shelve reason, or
    the daemon's explanation. ``value``/``limit``/``citation`` are the alarm's latest condition data.
    ``level`` is the escalation level at the time (1 = the first recipient list). ``seq`` is the journal
    sequence number once journaled (delivery can use it to deduplicate), None from the pure state machine.
    """

    time: float
    alarm_id: str
    kind: Kind
    from_state: State
    to_state: State
    priority: Priority
    who: str
    why: str
    value: float | None
    limit: float | None
    citation: str
    level: int = 1
    seq: int | None = None

    @property
    def key(self) -> AlarmKey:
        return AlarmKey.parse(self.alarm_id)

    def to_payload(self) -> dict[str, Any]:
        site, channel, rule = self.alarm_id.split("/")
        return {"alarm": self.alarm_id, "site": site, "channel": channel, "rule": rule,
                "time": self.time, "kind": self.kind.value, "from": self.from_state.value,
                "to": self.to_state.value, "priority": self.priority.value, "who": self.who, "why": self.why,
                "value": self.value, "limit": self.limit, "citation": self.citation, "level": self.level}


@dataclass(frozen=True, slots=True)
class Refusal:
    """An operator action that was not carried out, and why (never an exception: operators mistype)."""

    alarm_id: str
    action: str
    user: str
    reason: str

    def to_payload(self) -> dict[str, Any]:
        return {"alarm": self.alarm_id, "action": self.action, "user": self.user, "reason": self.reason}


# ---- the state of one alarm ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AlarmState:
    """Everything the state machine knows about one alarm. Immutable: the machine returns a new one.

    ``condition`` is the raw episode state from the last input; ``active`` is the alarm's view of it after
    on/off delays and deadband. ``pending_since`` is when a delay started (an on-delay while ``condition``
    and not ``active``, an off-delay while ``active`` and not ``condition``). ``unacked_since`` is when the
    current unacknowledged stretch began (escalation is measured from it); ``notified`` when the alarm was
    last raised or reminded (re-alarm is measured from it).
    """

    key: AlarmKey
    settings: AlarmSettings = field(default_factory=AlarmSettings)
    phase: State = State.NORMAL
    mode: Mode = Mode.IN_SERVICE
    condition: bool = False
    active: bool = False
    pending_since: float | None = None
    value: float | None = None
    limit: float | None = None
    citation: str = ""
    unacked_since: float | None = None
    notified: float | None = None
    level: int = 1
    mode_until: float | None = None  # shelve expiry
    mode_by: str = ""
    mode_reason: str = ""
    changed: float | None = None  # time of the last transition

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def held(self) -> bool:
        """Active although the condition has gone (an off-delay running, or a value inside the deadband)."""
        return self.active and not self.condition

    @property
    def state(self) -> State:
        if self.mode is Mode.SHELVED:
            return State.SHELVED
        if self.mode is Mode.OUT_OF_SERVICE:
            return State.OUT_OF_SERVICE
        return self.phase

    # Persistence: key and settings come from the configuration at start; the rest is stored as JSON.
    _DYNAMIC = ("phase", "mode", "condition", "active", "pending_since", "value", "limit", "citation",
                "unacked_since", "notified", "level", "mode_until", "mode_by", "mode_reason", "changed")

    def to_record(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self._DYNAMIC}
        out["phase"] = self.phase.value
        out["mode"] = self.mode.value
        return out

    @classmethod
    def from_record(cls, key: AlarmKey, settings: AlarmSettings, record: dict[str, Any]) -> AlarmState:
        """Rebuild a persisted state under the current settings. Raises ValueError/KeyError/TypeError on a
        malformed record (the engine reports it and starts that alarm afresh)."""
        phase = State(record["phase"])
        if phase not in PHASES:
            raise ValueError(f"{phase.value!r} is not a phase")
        st = cls(key=key, settings=settings, phase=phase, mode=Mode(record["mode"]),
                 **{f: record[f] for f in cls._DYNAMIC if f not in ("phase", "mode")})
        for f in ("pending_since", "value", "limit", "unacked_since", "notified", "mode_until", "changed"):
            v = getattr(st, f)
            if v is not None and not isinstance(v, int | float):
                raise TypeError(f"{f} must be a number or null, got {v!r}")
        return st
