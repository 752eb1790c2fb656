"""Soak run (not a test, not part of `make test` or `make bench`): `pretreat run` for ``--minutes`` against 100
simulated instruments polled (or publishing) every second, with a fault injected every minute, proving that
nothing is lost and that the process does not grow.

    .venv/bin/python bench/soak.py [--minutes 30] [--fault-every 60] [--seed 1] [--keep DIR]

The site: 40 Modbus TCP pH meters (pH and temperature), 40 Modbus TCP flow meters (rate and totaliser), each
its own server, and 20 LEL meters publishing JSON with their own timestamps over MQTT, QoS 1; alarm events go
to a plant-SCADA MQTT channel. The daemon runs as its own process (``python -m monitor.cli run``), as systemd
would run it; the simulators, a mosquitto broker and an MQTT capture of the alarm events run here.

Every minute, 10 s in, one fault for 20 s, in turn: a device gone silent, a pH excursion below 5.0 (an alarm
raised and cleared), Modbus exception replies, a device power cycle (5 s off the wire), an MQTT meter gone
silent, short (garbage) replies. The last 40 s see no new fault, so everything is back to normal at the end.

Reported (markdown): the daemon's RSS over time and its growth after warm-up (the first third of the run, at
most 5 minutes; goal < 5 %), open file descriptors, event-loop lag (p99 over 5-minute windows, from the
daemon's health snapshot, and the worst single lag), and the proof:

- Modbus: each channel's rows (STALE ones aside) equal the polls the daemon counted: none lost or doubled;
  each good value is one the simulator served;
- MQTT: every reading published while the daemon was subscribed is recorded once, by its device timestamp;
- no (channel, time) twice in the historian; the journal verifies;
- alarms: every journaled transition was heard by the MQTT capture, in order; each injected pH excursion
  raised its ph_low alarm once and cleared it; no alarm is active at the end.

Why one script of about 430 lines: a soak run is one program run by hand (the site, the fault plan, the alarm
capture, the verification, the report), and none of its parts has a user apart from it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alarms.journal import Journal  # noqa: E402
from config.loader import load_config  # noqa: E402
from config.schema import SiteConfig  # noqa: E402
from monitor.health import health_path  # noqa: E402
from monitor.stores.readonly import connect_readonly  # noqa: E402
from simulators.broker import LocalBroker  # noqa: E402
from simulators.modbus_server import SimFault  # noqa: E402
from simulators.playback import Hold  # noqa: E402
from simulators.runner import SiteSimulator  # noqa: E402

SITE = "soak"
N_PH, N_FLOW, N_LEL = 40, 40, 20
EVENTS = "pretreat/soak/events"
FAULTS = ("silent", "ph_excursion", "exception", "restart", "mqtt_silent", "garbage")
FAULT_AT, FAULT_FOR, DOWN = 10.0, 20.0, 5.0


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def write_site(workdir: Path, broker: int) -> Path:
    ports = iter(free_ports(N_PH + N_FLOW))
    parts = [f'[daemon]\nhistorian = "{workdir}/soak.sqlite"\ncommit_interval = 0.5\ntick_interval = 1.0\n\n'
             f'[notify]\nstate_dir = "{workdir}/notify"\nmax_backoff = 2.0\n\n'
             f'[[notify.channel]]\nid = "plant-scada"\nkind = "mqtt"\nhost = "127.0.0.1"\nport = {broker}\n'
             'client_id = "pretreat-soak-alarms"\ntopic_prefix = "pretreat/soak"\n\n'
             f'[[site]]\nid = "{SITE}"\njurisdiction = "southeast"\ntimezone = "America/New_York"\n']
    for i in range(N_PH):
        parts.append(_modbus(f"ph{i}", next(ports), "ph_meter"))
        parts.append(_channel(f"ph_{i}", f"ph{i}", "ph", "pH", 'point = "ph"\nscale = 0.01\nvalid_min = 0\n'
                                                             "valid_max = 14"))
        parts.append(_channel(f"temp_{i}", f"ph{i}", "temperature", "degC",
                              'point = "temperature"\nscale = 0.1\nvalid_min = -10\nvalid_max = 100'))
    for i in range(N_FLOW):
        parts.append(_modbus(f"fm{i}", next(ports), "flow_meter"))
        parts.append(_channel(f"flow_{i}", f"fm{i}", "flow", "gpm",
                              'point = "flow_rate"\nvalid_min = 0\nvalid_max = 2000'))
        parts.append(_channel(f"total_{i}", f"fm{i}", "flow_total", "gal", 'point = "flow_total"\nvalid_min = 0'))
    for i in range(N_LEL):
        parts.append(f'[[site.instrument]]\nid = "lel{i}"\ndriver = "mqtt"\nhost = "127.0.0.1"\nport = {broker}\n'
                     'poll_interval = 1.0\ntime_field = "ts"\n')
        parts.append(_channel(f"lel_{i}", f"lel{i}", "lel", "%LEL",
                              f'topic = "soak/lel{i}"\nfield = "lel_pct"\nvalid_min = 0\nvalid_max = 100'))
    site = workdir / "soak.toml"
    site.write_text("\n".join(parts))
    return site


def _modbus(iid: str, port: int, rmap: str) -> str:
    return (f'[[site.instrument]]\nid = "{iid}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\nport = {port}\n'
            f'register_map = "{rmap}"\npoll_interval = 1.0\ntimeout = 0.5\n')


def _channel(cid: str, inst: str, kind: str, unit: str, extra: str) -> str:
    return f'[[site.channel]]\nid = "{cid}"\ninstrument = "{inst}"\nkind = "{kind}"\nunit = "{unit}"\n{extra}\n'


@dataclass(frozen=True)
class Fault:
    at: float  # s after the start
    kind: str
    target: str  # instrument id


def plan(seconds: float, every: float, rng: random.Random) -> list[Fault]:
    faults = []
    for m in range(int(seconds // every)):
        kind = FAULTS[m % len(FAULTS)]
        if kind in ("ph_excursion",):
            target = f"ph{rng.randrange(N_PH)}"
        elif kind == "mqtt_silent":
            target = f"lel{rng.randrange(N_LEL)}"
        else:
            target = rng.choice([f"ph{rng.randrange(N_PH)}", f"fm{rng.randrange(N_FLOW)}"])
        faults.append(Fault(at=m * every + FAULT_AT, kind=kind, target=target))
    return faults


async def inject(sim: SiteSimulator, f: Fault, windows: dict[str, list[tuple[float, float]]]) -> None:
    """Apply one fault for FAULT_FOR seconds, then clear it; note its wall-clock window per instrument."""
    start = time.time()
    try:
        await _inject(sim, f)
    finally:
        windows.setdefault(f.target, []).append((start, time.time()))


async def _inject(sim: SiteSimulator, f: Fault) -> None:
    if f.kind == "ph_excursion":
        overrides = sim.playback.overrides.setdefault(SITE, {})
        overrides[f"ph_{f.target[2:]}"] = Hold(4.4)
        await asyncio.sleep(FAULT_FOR)
        overrides.pop(f"ph_{f.target[2:]}", None)
    elif f.kind == "restart":
        key = sim.config.instruments_by_id[(SITE, f.target)].link_key
        await next(s for s in sim.servers if s.link_key == key).restart(DOWN)
    elif f.kind == "mqtt_silent":
        pub = sim.publishers[(SITE, f.target)]
        pub.fault = SimFault.SILENT
        await asyncio.sleep(FAULT_FOR)
        pub.fault = SimFault.NONE
    else:
        dev = sim.device(SITE, f.target)
        dev.fault = SimFault(f.kind)
        await asyncio.sleep(FAULT_FOR)
        dev.fault = SimFault.NONE


class Capture:
    """The plant's SCADA: a paho subscriber recording every alarm event (QoS 1, persistent session)."""

    def __init__(self, port: int) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id="soak-scada",
                                  clean_session=False)
        self.client.on_connect = lambda c, *_a: c.subscribe(EVENTS, qos=1)
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        with self.lock:
            self.events.append(json.loads(msg.payload))

    def seqs(self) -> list[int]:
        with self.lock:
            return [int(e["seq"]) for e in self.events]

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def proc_stats(pid: int) -> tuple[float, int]:
    """(RSS in MiB, open file descriptors) of a process, from /proc."""
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    return rss / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def read_health(config: SiteConfig) -> dict[str, Any]:
    try:
        return dict(json.loads(health_path(config.daemon.historian).read_text()))
    except (OSError, ValueError):
        return {}


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    [broker_port] = free_ports(1)
    broker = LocalBroker(port=broker_port)
    broker.start()
    config = load_config(write_site(workdir, broker_port))
    seconds = args.minutes * 60
    sim = SiteSimulator(config=config, tick=0.5, history=int(seconds * 2 + 600), mqtt_time_format="epoch")
    capture = Capture(broker_port)
    faults = plan(seconds, args.fault_every, random.Random(args.seed))
    samples: list[dict[str, float]] = []
    log = (workdir / "daemon.log").open("wb")
    daemon: asyncio.subprocess.Process | None = None
    try:
        await sim.start()
        daemon = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "run", "--config", str(config.source),
            cwd=ROOT, stdout=log, stderr=asyncio.subprocess.STDOUT)
        t0 = time.monotonic()
        subscribed_at: float | None = None  # from then on the broker keeps what the daemon has not yet taken
        windows: dict[str, list[tuple[float, float]]] = {}
        pending = list(faults)
        tasks: list[asyncio.Task[None]] = []
        while (elapsed := time.monotonic() - t0) < seconds:
            while pending and pending[0].at <= elapsed:
                tasks.append(asyncio.create_task(inject(sim, pending.pop(0), windows)))
            if daemon.returncode is not None:
                raise RuntimeError(f"the daemon exited with {daemon.returncode}; see {workdir / 'daemon.log'}")
            rss, fds = proc_stats(daemon.pid)
            health = read_health(config)
            lag = health.get("loop_lag", {})
            streams = health.get("streaming", {})
            if subscribed_at is None and len(streams) == N_LEL and all(c.get("subscribed") for c in streams.values()):
                subscribed_at = time.time()
            mem = health.get("memory") or {}
            sqlite_kib = mem.get("sqlite_kib")
            samples.append({"t": elapsed, "rss": rss, "fds": fds, "lag_p99": lag.get("p99_ms", 0.0),
                            "lag_max": lag.get("max_ms", 0.0),
                            "sqlite": float("nan") if sqlite_kib is None else sqlite_kib / 1024,
                            "blocks": mem.get("python_blocks", 0)})
            await asyncio.sleep(5.0)
        await asyncio.gather(*tasks)
        settled = await settle(config, capture)
        stopped_at = time.time()
        daemon.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(daemon.wait(), 60)
        history = {k: list(v) for k, v in sim.history.items()}
    finally:
        if daemon is not None and daemon.returncode is None:
            daemon.kill()
            await daemon.wait()
        await sim.stop()
        capture.stop()
        broker.stop()
        log.close()
    if subscribed_at is None:
        raise RuntimeError("the daemon's MQTT instruments never all subscribed")
    proof = verify(config, history, capture, faults, windows, subscribed_at, stopped_at)
    return {"samples": samples, "proof": proof, "exit": code, "settled": settled, "faults": faults,
            "health": read_health(config), "seconds": seconds}


async def settle(config: SiteConfig, capture: Capture, within: float = 90.0) -> bool:
    """Wait until no alarm condition is active and every journaled transition was heard."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        states, seqs = _alarm_conditions(config), _journal_seqs(config)
        if not any(states.values()) and set(seqs) <= set(capture.seqs()):
            return True
        await asyncio.sleep(1.0)
    return False


def _alarm_conditions(config: SiteConfig) -> dict[str, bool]:
    db = connect_readonly(config.daemon.historian, timeout=10)
    try:
        return {a: bool(json.loads(r)["condition"]) for a, r in db.execute("SELECT alarm_id, record FROM alarm_state")}
    finally:
        db.close()


def _journal_seqs(config: SiteConfig) -> list[int]:
    j = Journal(path=config.daemon.historian)
    try:
        return [r.seq for r in j.records(kinds=["transition"])]
    finally:
        j.close()


def verify(config: SiteConfig, history: dict[tuple[str, str], list[Any]], capture: Capture, faults: list[Fault],
           windows: dict[str, list[tuple[float, float]]], subscribed_at: float,
           stopped_at: float) -> dict[str, Any]:
    """The proof: ground truth (simulators, capture, the daemon's own poll counts) against the record."""
    db = connect_readonly(config.daemon.historian)
    rows = db.execute("SELECT c.channel, r.time, r.value, q.name FROM readings r JOIN channels c "
                      "ON c.id = r.channel_id JOIN qualities q ON q.code = r.quality ORDER BY r.seq").fetchall()
    db.close()
    per: dict[str, list[tuple[float, float | None, str]]] = {}
    for ch, t, v, q in rows:
        per.setdefault(ch, []).append((t, v, q))
    dup = sum(n - 1 for n in Counter((ch, t) for ch, t, _v, _q in rows).values() if n > 1)
    health = read_health(config)
    polls = {k.split("/", 1)[1]: v["polls"] for k, v in health["instruments"].items()}
    lost_polls = invented = mqtt_missing = mqtt_checked = 0
    for c in config.channels:
        mine = per.get(c.id, [])
        if c.instrument in polls:
            lost_polls += abs(polls[c.instrument] - sum(1 for _t, _v, q in mine if q != "stale"))
            served = {round(s.value, 6) for s in history[(SITE, c.id)]}
            invented += sum(1 for _t, v, q in mine if q == "good" and round(v or 0.0, 6) not in served)
        else:
            good = {round(t, 3): v for t, v, q in mine if q == "good"}
            silent = windows.get(c.instrument, [])  # an MQTT meter told to go silent published nothing then
            for s in history[(SITE, c.id)]:
                if subscribed_at < s.wall_time < stopped_at - 2 and not any(a <= s.wall_time <= b
                                                                             for a, b in silent):
                    mqtt_checked += 1
                    mqtt_missing += int(good.get(round(s.wall_time, 3)) != s.value)
    j = Journal(path=config.daemon.historian)
    verified = j.verify().ok
    transitions = list(j.records(kinds=["transition"]))
    j.close()
    heard = capture.seqs()
    first_seen = list(dict.fromkeys(heard))
    raises = Counter(r.payload["alarm"] for r in transitions if r.payload["kind"] == "raise"
                     and r.payload["alarm"].endswith("/ph_low"))
    clears = Counter(r.payload["alarm"] for r in transitions if r.payload["kind"] == "clear"
                     and r.payload["alarm"].endswith("/ph_low"))
    expected = Counter(f"{SITE}/ph_{f.target[2:]}/ph_low" for f in faults if f.kind == "ph_excursion")
    return {
        "rows": len(rows), "duplicates": dup, "modbus_rows_vs_polls_off_by": lost_polls,
        "good_values_never_served": invented, "mqtt_readings_checked": mqtt_checked, "mqtt_missing": mqtt_missing,
        "journal_verifies": verified, "transitions": len(transitions),
        "transitions_not_heard": len({r.seq for r in transitions} - set(heard)),
        "events_in_order": first_seen == sorted(first_seen), "event_repeats": len(heard) - len(first_seen),
        "ph_excursions": sum(expected.values()), "ph_low_raises_as_injected": raises == expected == clears,
    }


def _median(samples: list[dict[str, Any]], key: str) -> float:
    return statistics.median([s[key] for s in samples]) if samples else float("nan")


def render(res: dict[str, Any], minutes: int) -> str:
    samples = res["samples"]
    warm = min(300.0, res["seconds"] / 3)
    after = [s for s in samples if s["t"] >= warm]
    base = statistics.median([s["rss"] for s in after[:6]]) if after else float("nan")
    end = statistics.median([s["rss"] for s in after[-6:]]) if after else float("nan")
    growth = (end - base) / base * 100
    p = res["proof"]
    h = res["health"]
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    out = [f"machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; "
           f"load average at the end {os.getloadavg()[0]:.2f}",
           f"{minutes}-minute soak: {N_PH} pH + {N_FLOW} flow meters (Modbus TCP) and {N_LEL} LEL meters (MQTT), "
           f"{len(res['faults'])} faults injected ({', '.join(sorted({f.kind for f in res['faults']}))}), "
           f"daemon exit code {res['exit']}", "",
           "| measure | value | goal |", "|---|---:|---|",
           f"| RSS after warm-up ({warm:.0f} s) → at the end | {base:.1f} → {end:.1f} MiB | |",
           f"| RSS growth after warm-up | {growth:+.2f} % | < 5 % |",
           f"| of which SQLite's allocations (page caches, bounded by cache_size) | "
           f"{_median(after[:6], 'sqlite'):.1f} → {_median(after[-6:], 'sqlite'):.1f} MiB | |",
           f"| Python objects (allocated blocks) | {_median(after[:6], 'blocks'):,.0f} → "
           f"{_median(after[-6:], 'blocks'):,.0f} | |",
           f"| open file descriptors after warm-up → at the end | {after[0]['fds']} → {after[-1]['fds']} | flat |",
           f"| event-loop lag p99 after warm-up (worst 5-min window) | {max(s['lag_p99'] for s in after):.1f} ms "
           "| |",
           f"| event-loop lag, worst single | {h.get('loop_lag', {}).get('max_ms', float('nan')):.1f} ms | |",
           f"| readings recorded | {p['rows']:,} | |",
           f"| Modbus rows vs. polls counted by the daemon, off by | {p['modbus_rows_vs_polls_off_by']} | 0 |",
           f"| good values the simulators never served | {p['good_values_never_served']} | 0 |",
           f"| MQTT readings published while subscribed, missing | {p['mqtt_missing']} of "
           f"{p['mqtt_readings_checked']:,} | 0 |",
           f"| (channel, time) recorded twice | {p['duplicates']} | 0 |",
           f"| journal verifies | {'yes' if p['journal_verifies'] else 'NO'} | yes |",
           f"| alarm transitions journaled / not heard by SCADA | {p['transitions']} / "
           f"{p['transitions_not_heard']} | 0 not heard |",
           f"| events in journal order (repeats after reconnects) | {'yes' if p['events_in_order'] else 'NO'} "
           f"({p['event_repeats']}) | yes |",
           f"| pH excursions injected; each raised and cleared ph_low once | {p['ph_excursions']}; "
           f"{'yes' if p['ph_low_raises_as_injected'] else 'NO'} | yes |",
           f"| all alarms back to normal, all events heard, at the end | {'yes' if res['settled'] else 'NO'} "
           "| yes |", "", "RSS and descriptors over time:", "",
           "| minute | RSS MiB | SQLite MiB | Python blocks | fds | loop lag p99 ms |",
           "|---:|---:|---:|---:|---:|---:|"]
    for m in range(minutes + 1):
        near = [s for s in samples if m * 60 <= s["t"] < m * 60 + 60]
        if near:
            s = near[-1]
            out.append(f"| {m} | {s['rss']:.1f} | {s['sqlite']:.1f} | {s['blocks']:,} | {s['fds']} | "
                       f"{s['lag_p99']:.1f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fault-every", type=float, default=60.0, metavar="S",
                    help="seconds between fault injections (default 60; at least 30: each lasts 20 s)")
    ap.add_argument("--keep", type=Path, help="work folder to keep (site, historian, daemon log)")
    args = ap.parse_args()
    if args.minutes < 2 or args.fault_every < FAULT_AT + FAULT_FOR:
        ap.error(f"--minutes must be at least 2 and --fault-every at least {FAULT_AT + FAULT_FOR:g}")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        res = asyncio.run(run(args, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="pretreat-soak-") as d:
            res = asyncio.run(run(args, Path(d)))
    print(render(res, args.minutes))
    p = res["proof"]
    ok = (res["exit"] == 0 and res["settled"] and p["duplicates"] == 0 and p["modbus_rows_vs_polls_off_by"] == 0
          and p["good_values_never_served"] == 0 and p["mqtt_missing"] == 0 and p["journal_verifies"]
          and p["transitions_not_heard"] == 0 and p["ph_low_raises_as_injected"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
