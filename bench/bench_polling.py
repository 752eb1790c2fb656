"""Benchmark: Modbus TCP device polls per second sustained by one `pretreat run` process.

What it measures, each in fresh processes, median of --runs runs:
1. **paced**: 100 simulated devices (10 holding registers each, 10 channels per device) polled every
   0.1 s, i.e. a demand of 1,000 polls/s; the achieved rate is read from the daemon's own health counters, and
   every reading is checked to be in the SQLite historian afterwards.
2. **flat out**: the same devices with a 2 ms poll interval, far shorter than a reply takes under this load, so
   each device is polled again as soon as its previous reply is in (the daemon skips and counts the polls that
   would overlap, and makes the skipped one up as the reply arrives): its ceiling. The historian must keep up:
   the run reports its queue depth at the end of the window, and a rate whose readings pile up in memory would
   not count as sustained.
   (Until the poll rounds, a 10 ms interval was used: 100 devices x 100 polls/s capped the demand at
   10,000/s, below what a bare client reaches, so the ratio measured the cap, not the daemon.)
3. **bare pymodbus**: one process running 100 `AsyncModbusTcpClient`s, each reading the same 10 registers
   in a loop, storing nothing: the library's own ceiling at the same concurrency.
The ratio (2)/(3) is what the daemon's decoding, checks and storage cost relative to the Modbus round trip.
The simulators run in a separate process (`python -m simulators.modbus_server`). Peak RSS is the daemon's
VmHWM. Usage: `python bench/bench_polling.py [--runs 3] [--seconds 15] [--devices 100]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import machine  # noqa: E402

PY = sys.executable
FLAT_INTERVAL = 0.002  # s: see the module doc


def free_ports(n: int) -> list[int]:
    import socket

    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


# The channels of a judged device (`write_site(..., judged=True)`): a control manhole's instruments behind one
# Modbus TCP address, as in config/sites/demo.toml, so that each reading meets the rules a site in the Town of
# Southeast has: pH (§ 112-5A(3)), explosive vapour (§ 112-5A(1)(a)), slug flow against the 24-hour average, the
# sampler's refrigeration and interval (the demonstration permit below) and data quality. The static simulator
# serves zeros: each channel's offset puts that zero inside its limits (pH 7.00, the fridge at 4.0 °C, 50 gpm), so
# the benchmark measures steady, compliant monitoring, every reading judged, not an alarm storm. The discharge
# temperature is recorded unjudged (the town states no limit at the point of discharge, `pretreat rules` says so).
JUDGED_CHANNELS = (  # (point, kind, unit, extra keys)
    ("r0", "ph", "pH", 'scale = 0.01\noffset = 7.0\nvalid_min = 0\nvalid_max = 14\n'),
    ("r1", "ph", "pH", 'scale = 0.01\noffset = 7.0\nvalid_min = 0\nvalid_max = 14\n'),
    ("r2", "flow", "gpm", 'offset = 50.0\nvalid_min = 0\nvalid_max = 2000\n'),
    ("r3", "flow_total", "gal", 'valid_min = 0\n'),
    ("r4", "lel", "%LEL", 'valid_min = 0\nvalid_max = 100\n'),
    ("r5", "temperature", "degC", 'location = "discharge"\nscale = 0.1\noffset = 20.0\n'),
    ("r6", "sampler_temperature", "degC", 'scale = 0.1\noffset = 4.0\nvalid_min = -20\nvalid_max = 50\n'),
    ("r7", "sampler_count", "count", 'valid_min = 0\n'),
    ("r8", "sampler_bottle_full", "bool", ""),
    ("r9", "sampler_fault", "bool", ""),
)
_JUDGED_SITE = """jurisdiction = "southeast"
[site.permit]
id = "SE-IU-DEMO-01"  # config/sites/demo.toml's demonstration permit, which the citations name
[site.permit.limits.sampler_temperature]
setpoint_c = 4.0
tolerance_c = 2.0
wording = "4 °C plus or minus 2 °C: 2 °C and 6 °C comply"
cite = "Permit SE-IU-DEMO-01 (demonstration), Part III.B.2"
quote = "The composite sampler shall keep the sample at four degrees Celsius, plus or minus two degrees Celsius"
[site.permit.limits.sampler_interval]
minutes = 15.0
operator = ">"
wording = "a sample every fifteen minutes or less"
cite = "Permit SE-IU-DEMO-01 (demonstration), Part III.B.1"
quote = "The composite sampler shall sample the wastewater at fifteen-minute intervals or less"
"""


def write_site(workdir: Path, ports: list[int], poll_interval: float, *, judged: bool = False) -> Path:
    """A site file of one Modbus TCP device a port, 10 holding registers each. ``judged``: each device is a
    control manhole, a site of its own under the Town of Southeast's ordinance and a permit, its registers the
    channels of `JUDGED_CHANNELS`; otherwise one site of ten channels a device of kind "other", which only the
    data-quality rules judge (the polling and storage path alone)."""
    regmap = workdir / "bench_map.toml"
    regmap.write_text('name = "bench"\n' + "".join(
        f'[[point]]\nname = "r{i}"\ntable = "holding"\naddress = {i}\ntype = "uint16"\n\n' for i in range(10)))
    parts = [f'[daemon]\nhistorian = "{workdir}/bench.sqlite"\ncommit_interval = 0.5\ntick_interval = 1.0\n']
    if not judged:
        parts.append('[[site]]\nid = "bench"\ntimezone = "UTC"\n')
    for n, port in enumerate(ports):
        if judged:  # a control manhole is a site: its permit's rules bind to its own flow meter and sampler
            parts.append(f'\n[[site]]\nid = "mh{n}"\ntimezone = "UTC"\n{_JUDGED_SITE}')
        parts.append(textwrap.dedent(f"""
            [[site.instrument]]
            id = "dev{n}"
            driver = "modbus_tcp"
            host = "127.0.0.1"
            port = {port}
            register_map = "{regmap}"
            poll_interval = {poll_interval}
            timeout = 1.0
            """))
        for i in range(10):
            if judged:
                point, kind, unit, extra = JUDGED_CHANNELS[i]
                parts.append(f'[[site.channel]]\nid = "d{n}r{i}"\ninstrument = "dev{n}"\npoint = "{point}"\n'
                             f'kind = "{kind}"\nunit = "{unit}"\n{extra}')
            else:
                parts.append(f'[[site.channel]]\nid = "d{n}r{i}"\ninstrument = "dev{n}"\npoint = "r{i}"\n'
                             'kind = "other"\nunit = "count"\n')
    site = workdir / "site.toml"
    site.write_text("".join(parts))
    return site


def start_sim(site: Path, ports: list[int], *, timeout: float = 30.0) -> subprocess.Popen[bytes]:
    """The simulator process, once every port accepts (``timeout`` s: 1,000 servers take longer)."""
    import socket

    log = site.with_name("sim.log").open("w")
    proc = subprocess.Popen([PY, "-m", "simulators.modbus_server", str(site)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    tail = site.with_name("sim.log").read_text()[-2000:]
                    raise RuntimeError(f"simulator did not start:\n{tail}") from None
                time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def total_polls(health: Path) -> tuple[float, int, int]:
    for _ in range(50):
        try:
            snap = json.loads(health.read_text())
            inst = snap["instruments"].values()
            return snap["time"], sum(i["polls"] for i in inst), sum(i["skipped"] for i in inst)
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            time.sleep(0.1)
    raise RuntimeError(f"no health snapshot at {health}")


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_daemon(site: Path, workdir: Path, seconds: float) -> dict[str, float]:
    for f in workdir.glob("bench.sqlite*"):
        f.unlink()
    health = workdir / "bench.sqlite.health.json"
    proc = subprocess.Popen([PY, "-m", "monitor.cli", "--log-level", "ERROR", "run", "--config", str(site)],
                            cwd=ROOT)
    try:
        time.sleep(3.0)  # connect and warm up
        t0, p0, _ = total_polls(health)
        cpu0, loop0 = _cpu_seconds(proc.pid), _cpu_seconds(proc.pid, thread=proc.pid)
        time.sleep(seconds)
        t1, p1, skipped = total_polls(health)
        cpu1, loop1 = _cpu_seconds(proc.pid), _cpu_seconds(proc.pid, thread=proc.pid)
        backlog = json.loads(health.read_text())["historian"]["queue_depth"]
        rss = vm_hwm_mb(proc.pid)
    finally:
        stop(proc)
    polls = p1 - p0
    _, final_polls, _ = total_polls(health) if health.exists() else (0, 0, 0)
    rows, stale = recorded_rows(workdir / "bench.sqlite")
    return {"polls_per_s": polls / (t1 - t0), "rss_mb": rss, "recorded": rows, "stale": stale,
            "expected": final_polls * 10, "skipped": skipped, "cpu_us_per_poll": (cpu1 - cpu0) / polls * 1e6,
            "backlog": backlog, "loop_busy": (loop1 - loop0) / (t1 - t0)}


def recorded_rows(historian: Path) -> tuple[int, int]:
    """(readings the polls produced, STALE samples the clock tick added), from the historian.

    Why apart: every poll records one sample per channel, good or bad, so the first must equal polls x 10. The
    tick adds one STALE sample when a channel has had no good reading for its window (here one poll interval
    plus the 1 s timeout): at start-up, before a device's first reply (the tracker starts counting when the
    daemon is built, before the historian opens and the devices connect), and flat out whenever a loaded
    machine delays a device's reply past the window. Counted together, they made one flat-out run look like
    810 readings more than polls x 10."""
    with sqlite3.connect(historian) as db:
        by_quality = dict(db.execute("SELECT q.name, count(*) FROM readings r JOIN qualities q "
                                     "ON q.code = r.quality GROUP BY q.name").fetchall())
    stale = by_quality.pop("stale", 0)
    return sum(by_quality.values()), stale


def _cpu_seconds(pid: int, *, thread: int | None = None) -> float:
    """CPU time of a process (all threads), or of one of its threads (the main thread's id is the pid)."""
    stat = Path(f"/proc/{pid}/stat") if thread is None else Path(f"/proc/{pid}/task/{thread}/stat")
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BARE = """
import asyncio, sys, time
from pymodbus.client import AsyncModbusTcpClient
ports = [int(p) for p in sys.argv[1].split(",")]; seconds = float(sys.argv[2])
async def main():
    clients = [AsyncModbusTcpClient("127.0.0.1", port=p, timeout=1, retries=0, reconnect_delay=0) for p in ports]
    for c in clients:
        await c.connect()
    count = 0; stop_at = 0.0
    async def loop(c):
        nonlocal count
        while time.monotonic() < stop_at:
            rr = await c.read_holding_registers(0, count=10, device_id=1)
            if not rr.isError():
                count += 1
    stop_at = time.monotonic() + 2.0
    await asyncio.gather(*(loop(c) for c in clients))  # warm-up
    count = 0; t0 = time.monotonic(); stop_at = t0 + seconds; c0 = time.process_time()
    await asyncio.gather(*(loop(c) for c in clients))
    print(count / (time.monotonic() - t0), (time.process_time() - c0) / count * 1e6)
    for c in clients:
        c.close()
asyncio.run(main())
"""


def run_bare(ports: list[int], seconds: float) -> tuple[float, float]:
    """(reads/s, client CPU µs per read)."""
    out = subprocess.run([PY, "-c", BARE, ",".join(map(str, ports)), str(seconds)], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    rate, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(rate), float(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--devices", type=int, default=100)
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {"paced": [], "flat": []}
    bare: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ports = free_ports(args.devices)
        for run in range(args.runs):
            for mode, interval in (("paced", 0.1), ("flat", FLAT_INTERVAL)):
                site = write_site(workdir, ports, interval)
                sim = start_sim(site, ports)
                try:
                    results[mode].append(run_daemon(site, workdir, args.seconds))
                finally:
                    stop(sim)
            sim = start_sim(site, ports)
            try:
                bare.append(run_bare(ports, args.seconds))
            finally:
                stop(sim)
            flat = results["flat"][-1]
            print(f"run {run + 1}: paced {results['paced'][-1]['polls_per_s']:.0f}/s, flat out "
                  f"{flat['polls_per_s']:.0f}/s ({flat['cpu_us_per_poll']:.0f} µs CPU a poll, event loop "
                  f"{flat['loop_busy']:.0%} busy, historian backlog "
                  f"{flat['backlog']:,.0f}), bare pymodbus {bare[-1][0]:.0f}/s ({bare[-1][1]:.0f} µs CPU a read), "
                  f"ratio {flat['polls_per_s'] / bare[-1][0]:.2f}", flush=True)
    med = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in results.items()}
    bare_rate = statistics.median(b[0] for b in bare)
    bare_cpu = statistics.median(b[1] for b in bare)
    ratios = [f["polls_per_s"] / b[0] for f, b in zip(results["flat"], bare, strict=True)]
    lost = [r["expected"] - r["recorded"] for rs in results.values() for r in rs]
    print(f"\nmachine: {machine()}")
    print(f"{args.devices} Modbus TCP devices x 10 registers, one simulator process, {args.runs} runs of "
          f"{args.seconds:g} s, medians\n")
    print("| measure | value |\n|---|---:|")
    print(f"| daemon, paced at 0.1 s per device (demand {args.devices / 0.1:,.0f} polls/s) | "
          f"{med['paced']['polls_per_s']:,.0f} polls/s |")
    print(f"| daemon, flat out ({FLAT_INTERVAL * 1000:g} ms interval: demand {args.devices / FLAT_INTERVAL:,.0f} "
          f"polls/s) | {med['flat']['polls_per_s']:,.0f} polls/s |")
    print(f"| historian backlog at the end of the flat-out window (samples queued, not yet committed) | "
          f"{med['flat']['backlog']:,.0f} |")
    print(f"| bare pymodbus async loop, same concurrency, storing nothing | {bare_rate:,.0f} reads/s |")
    print(f"| ratio daemon flat out / bare pymodbus (median of the per-run ratios) | {statistics.median(ratios):.2f} "
          f"(goal ≥ 0.5) |")
    print(f"| CPU a poll: daemon flat out (all threads) / bare client | {med['flat']['cpu_us_per_poll']:.0f} / "
          f"{bare_cpu:.0f} µs |")
    print(f"| daemon's event-loop thread flat out: share of one core it ran | {med['flat']['loop_busy']:.0%} |")
    print(f"| daemon peak RSS (paced / flat out) | {med['paced']['rss_mb']:.0f} / {med['flat']['rss_mb']:.0f} MB |")
    print(f"| readings recorded vs polled x 10 (all runs; STALE samples of the clock tick not included) | "
          f"{'all recorded, none extra' if not any(lost) else lost} |")
    stale = [int(r["stale"]) for rs in results.values() for r in rs]
    print(f"| STALE samples the clock tick recorded (paced, flat out; per run) | "
          f"{[int(r['stale']) for r in results['paced']]}, {[int(r['stale']) for r in results['flat']]} "
          f"({sum(stale):,} in all: channels without a good reading within their window, at start-up or under "
          "load) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
