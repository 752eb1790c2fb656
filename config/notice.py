"""Notice-of-violation drafting data per jurisdiction: the ordinance's notice clause and the letter template.

``config/notices/<jurisdiction>.toml`` holds what the ordinance says about a written notice of violation: the
control authority's name, the section with its seed line and verbatim quote (checked against the seed text by
the tests, like the profiles' limits), and the correction period where the ordinance states one (Town of
Southeast § 112-11: a correction plan "within 30 days of the date of the notice"; Town of Pawling item C(1): a
time limit "not exceeding 30 days", a ceiling). A jurisdiction without such a file gets no correction deadline:
none is ever invented.

``config/notices/<jurisdiction>.md`` is the letter (``default.md`` where a jurisdiction has none): Markdown
with ``$name`` placeholders (`string.Template`), editable by the control authority. A line holding only
``$facts``, ``$chart``, ``$violation`` or ``$obligations`` is replaced by that block (a table or the chart).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from config.limits import load_profile

NOTICES_DIR = Path(__file__).parent / "notices"
_KEYS = {"authority", "cite", "line", "line_end", "quote", "correction_days", "correction_is_ceiling", "correction"}


class NoticeConfigError(ValueError):
    """A notice file that cannot be used (unreadable, an unknown key, a wrong type): names the file and key."""


@dataclass(frozen=True, slots=True)
class NoticeClause:
    authority: str  # the control authority that serves the notice ("Town of Southeast")
    citation: str = ""  # the ordinance's notice-of-violation section ("" where none is on file)
    quote: str = ""
    line: int = 0  # seed line (provenance; checked by the tests)
    line_end: int = 0
    correction_days: int | None = None  # days from the notice's date; None: the ordinance states none
    correction_is_ceiling: bool = False  # "not exceeding 30 days": the authority may set a shorter period
    correction: str = ""  # what is due by then, in the ordinance's terms


def notice_clause(jurisdiction: str) -> NoticeClause:
    """The jurisdiction's notice clause; without a notice file, only the authority's name (from the profile)."""
    path = NOTICES_DIR / f"{jurisdiction}.toml"
    if not path.exists():
        profile, _errors = load_profile(jurisdiction) if jurisdiction else (None, [])
        return NoticeClause(authority=profile.name if profile else "the control authority")
    try:
        with path.open("rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise NoticeConfigError(f"{path}: not a readable TOML file ({exc})") from exc
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise NoticeConfigError(f"{path}: unknown key(s) {unknown}, expected some of {sorted(_KEYS)}")
    days = raw.get("correction_days")
    if days is not None and (not isinstance(days, int) or isinstance(days, bool) or days <= 0):
        raise NoticeConfigError(f"{path}: correction_days = {days!r}, expected a positive whole number of days")
    for key in ("authority", "cite", "quote", "correction"):
        if not isinstance(raw.get(key, ""), str):
            raise NoticeConfigError(f"{path}: {key} = {raw[key]!r}, expected text")
    return NoticeClause(authority=str(raw.get("authority", "")), citation=str(raw.get("cite", "")),
                        quote=str(raw.get("quote", "")), line=int(raw.get("line", 0)),
                        line_end=int(raw.get("line_end", 0)), correction_days=days,
                        correction_is_ceiling=bool(raw.get("correction_is_ceiling", False)),
                        correction=str(raw.get("correction", "")))


def template_path(jurisdiction: str) -> Path:
    """The letter template in force for ``jurisdiction`` (its own, else ``default.md``)."""
    own = NOTICES_DIR / f"{jurisdiction}.md"
    return own if own.exists() else NOTICES_DIR / "default.md"
