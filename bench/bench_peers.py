"""Benchmark: the daemon beside what a small utility would run instead — Node-RED with node-red-contrib-modbus —
and beside a bare pymodbus loop, back to back on the same simulated devices; and every `pretreat` command's start.

One run measures, on the same simulators (`python -m simulators.modbus_server`, 10 holding registers a device,
one Modbus TCP port a device, at most ``--sim-devices`` devices a process: one process for 100 devices, four for
1,000, so that the simulators answer every read at 1,000 × 1 s), each of:
- **Node-RED default**: one `modbus-client` config node a device with the contrib's defaults (command queue on,
  `bufferCommands`), a `modbus-getter` a device reading the 10 registers, `emptyMsgOnFail` on so that a failed
  read (a timeout, the queue's silent "Queue full" rejection) comes out as a message and is counted;
- **Node-RED, queue off**: the same flow with `bufferCommands` off (the tuned form);
- **the daemon**: `pretreat run` on a site file of the same devices, each a control manhole of its own under the
  Town of Southeast's ordinance and a permit (`bench.bench_polling.JUDGED_CHANNELS`: two pH probes, flow, the
  flow total, explosive vapour, the discharge temperature, the sampler's fridge, count, bottle and fault), every
  reading stored in the historian and judged by the rules in force on its channel (pH band, LEL successive and
  single, sampler refrigeration and interval, the slug rule's baseline, data quality; `pretreat rules` on the
  site file lists them). The simulators serve zeros and each channel's offset puts that inside its limits, so
  this is steady, compliant monitoring; the slug rule has no baseline yet (that takes days of readings), so it
  opens its `slug_no_baseline` notice a flow meter at the start, as on a new installation;
- **bare pymodbus**: one process, one `AsyncModbusTcpClient` a device, reading, storing nothing;
at three loads: **flat out** (100 devices, each read again as soon as its reply is in: Node-RED's getter output
wired back to its input, the daemon at a 2 ms interval), **paced 100 × 1 s** and **paced 1,000 × 1 s**.
For each: reads/s, CPU % of one core and CPU µs a read (the process's user + system time over the window, all
threads), RSS at the end of the window, errors; for the daemon also the event-loop lag p99 over the last 30 s
and the stored readings checked against polls × 10 (STALE samples of the clock tick counted apart, and why
they are there printed under the table). A run in which the daemon stored fewer or more readings than its polls
made, or a peer produced no figures at all, exits 1; the goals are printed met or not met (they are figures of
the host's speed as much as of the code, so a goal not met is reported, not an error).
A run measures the four one after the other, in the order above, and the next run in the reverse order: the
machine's cores change speed over minutes (other work on the host), and a pair measured next to each other, in
alternating order, is the fairest comparison this machine allows (the paired ratios).

Node-RED is installed from npm into bench/out/node-red/ (git ignores bench/out/): node-red ~4.1 and
node-red-contrib-modbus 5.60.2. That contrib's own dependency `@openp4nr/modbus-serial` is a tarball hosted
outside the npm registry (cloudsmith.io); package.json's `overrides` aliases it to `modbus-serial` from npm
(`npm:modbus-serial@^8.0.25`, the upstream the fork was made from). The contrib asks for node ≥ 22; this
machine has node 20 (npm warns, the nodes load and read).

Usage: `python bench/bench_peers.py [--runs 5] [--paced-runs 3] [--seconds 25] [--large 1000]
[--loads flat,small,large] [--sim-devices 250] [--skip-node-red]`; the defaults are the documented run (medians of
5 flat-out runs, 3 of each paced load, ~35 minutes). Keep `--warm` + `--seconds` over 30 at 1,000 devices: the
lag is the daemon's p99 over its last 30 s, which would otherwise include the start-up's connects.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_polling import start_sim, stop, write_site  # noqa: E402
from bench.machine import machine  # noqa: E402
from bench.peers_node_red import NODE_DIR, flows, install, node_red_versions, settings_js  # noqa: E402

PY = sys.executable
SMOKE_ARGS = ["--runs", "1", "--paced-runs", "1", "--seconds", "4", "--large", "20", "--small", "10",
              "--starts", "1"]
FLAT = 0.002  # s: the daemon's flat-out interval (see bench/bench_polling.py)


@dataclass
class Figures:
    reads_per_s: float
    cpu_pct: float  # % of one core
    rss_mb: float
    errors: int
    extra: dict[str, float]

    @property
    def us_per_read(self) -> float:
        return self.cpu_pct / 100 / self.reads_per_s * 1e6 if self.reads_per_s else float("nan")


Counter = Callable[[], tuple[float, int, int]]  # -> (time, reads so far, errors so far)


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports that bind now, below the kernel's ephemeral range: with 1,000 devices, ports taken
    from that range were often handed out again (as the source port of a connection) before the simulator
    bound them."""
    import random
    import socket

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports: list[int] = []
    for port in random.sample(range(10_000, low), low - 10_000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise RuntimeError(f"not {n} free ports below {low}")


def start_sims(workdir: Path, ports: list[int], per_process: int) -> list[subprocess.Popen[bytes]]:
    """Simulator processes serving ``ports``, at most ``per_process`` devices each, every port accepting.

    Why several: one process serving 1,000 devices at 1 s spends most of a core answering them; what it cannot
    answer within the clients' 1 s timeout comes back as timeouts to every peer, so the load then measures the
    simulator. Each process gets its own site file in its own folder (``simN/``)."""
    count = max(1, -(-len(ports) // per_process))
    sims: list[subprocess.Popen[bytes]] = []
    try:
        for k in range(count):
            shard = ports[k::count]
            folder = workdir / f"sim{k}"
            folder.mkdir(exist_ok=True)
            sims.append(start_sim(write_site(folder, shard, 1.0), shard, timeout=300))
    except BaseException:
        for sim in sims:
            stop(sim)
        raise
    return sims


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(proc: subprocess.Popen[bytes], counter: Counter, *, seconds: float, warm: float) -> Figures:
    """Wait until reads flow, let it settle for ``warm`` s, then measure over ``seconds``."""
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if counter()[1] > 0:
                break
        except (OSError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args!r}: no reads within 120 s")
        time.sleep(0.2)
    time.sleep(warm)
    t0, r0, e0 = counter()
    c0 = cpu_seconds(proc.pid)
    w0 = time.monotonic()
    time.sleep(seconds)
    t1, r1, e1 = counter()
    c1 = cpu_seconds(proc.pid)
    w1 = time.monotonic()
    return Figures(reads_per_s=(r1 - r0) / (t1 - t0), cpu_pct=(c1 - c0) / (w1 - w0) * 100, rss_mb=rss_mb(proc.pid),
                   errors=e1 - e0, extra={})


# -- the daemon ---------------------------------------------------------------------------------------------
def run_daemon(workdir: Path, ports: list[int], interval: float, seconds: float, warm: float) -> Figures:
    for f in workdir.glob("bench.sqlite*"):
        f.unlink()
    site = write_site(workdir, ports, interval, judged=True)
    health = workdir / "bench.sqlite.health.json"

    def counter() -> tuple[float, int, int]:
        snap = json.loads(health.read_text())
        inst = snap["instruments"].values()
        # a failed poll records a bad sample for each of the device's 10 channels
        return snap["time"], sum(i["polls"] for i in inst), sum(i["bad_samples"] for i in inst) // 10

    proc = subprocess.Popen([PY, "-m", "monitor.cli", "--log-level", "ERROR", "run", "--config", str(site)],
                            cwd=ROOT)
    try:
        fig = measure(proc, counter, seconds=seconds, warm=warm)
        lag = json.loads(health.read_text())["loop_lag"]
    finally:
        stop(proc)
    from bench.bench_polling import recorded_rows

    snap = json.loads(health.read_text())
    polls = sum(i["polls"] for i in snap["instruments"].values())
    rows, stale = recorded_rows(workdir / "bench.sqlite")
    fig.extra = {"lag_p99_ms": lag.get("p99_ms_30s", lag["p99_ms"]), "missing": polls * 10 - rows,
                 "stale": stale, "episode_events": snap["episode_events"],
                 "alarms_active": snap["alarms"]["active"]}
    return fig


# -- bare pymodbus ------------------------------------------------------------------------------------------
BARE = """
import asyncio, json, os, signal, sys, time
from pymodbus.client import AsyncModbusTcpClient
ports = [int(p) for p in sys.argv[1].split(",")]; interval = float(sys.argv[2]); out = sys.argv[3]
reads = errors = 0
async def one(c, offset):
    global reads, errors
    due = time.monotonic() + offset
    while True:
        if interval:
            await asyncio.sleep(max(0.0, due - time.monotonic())); due += interval
        try:
            rr = await c.read_holding_registers(0, count=10, device_id=1)
            if rr.isError(): errors += 1
            else: reads += 1
        except Exception:
            errors += 1
async def report():
    while True:
        with open(out + ".tmp", "w") as f:
            json.dump({"time": time.time(), "reads": reads, "errors": errors}, f)
        os.replace(out + ".tmp", out)
        await asyncio.sleep(0.25)
async def main():
    clients = [AsyncModbusTcpClient("127.0.0.1", port=p, timeout=1, retries=0) for p in ports]
    for c in clients:
        await c.connect()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tasks = [asyncio.create_task(one(c, interval * i / len(clients))) for i, c in enumerate(clients)]
    tasks.append(asyncio.create_task(report()))
    await stop.wait()
    for t in tasks: t.cancel()
    for c in clients: c.close()
asyncio.run(main())
"""


def file_counter(path: Path) -> Counter:
    def counter() -> tuple[float, int, int]:
        d = json.loads(path.read_text())
        return d["time"], d["reads"], d["errors"]
    return counter


def run_bare(workdir: Path, ports: list[int], interval: float, seconds: float, warm: float) -> Figures:
    out = workdir / "bare.json"
    out.unlink(missing_ok=True)
    proc = subprocess.Popen([PY, "-c", BARE, ",".join(map(str, ports)), str(interval), str(out)], cwd=ROOT)
    try:
        return measure(proc, file_counter(out), seconds=seconds, warm=warm)
    finally:
        stop(proc)


# -- Node-RED -----------------------------------------------------------------------------------------------
def run_node_red(workdir: Path, ports: list[int], interval: float, seconds: float, warm: float, *,
                 buffer_commands: bool) -> Figures:
    user_dir = NODE_DIR  # its node_modules hold the contrib: Node-RED loads nodes from its user directory
    (port,) = free_ports(1)
    (user_dir / "settings.js").write_text(settings_js(port))
    (user_dir / "flows.json").write_text(json.dumps(flows(ports, interval, buffer_commands=buffer_commands)))
    url = f"http://127.0.0.1:{port}/bench/counts"

    def counter() -> tuple[float, int, int]:
        with urllib.request.urlopen(url, timeout=60) as r:
            d = json.loads(r.read())
        return d["time"] / 1000, d["reads"], d["errors"]

    log = (workdir / "node-red.log").open("w")
    proc = subprocess.Popen(["node", str(NODE_DIR / "node_modules" / "node-red" / "red.js"), "--userDir",
                             str(user_dir), "--settings", str(user_dir / "settings.js"), "flows.json"],
                            cwd=user_dir, stdout=log, stderr=subprocess.STDOUT)
    try:
        fig = measure(proc, counter, seconds=seconds, warm=warm)
        fig.extra = {"queue_full": counter_queue_full(url)}
        return fig
    except RuntimeError as exc:
        tail = (workdir / "node-red.log").read_text()[-2000:]
        raise RuntimeError(f"{exc}\n{tail}") from None
    finally:
        stop(proc)


def counter_queue_full(url: str) -> float:
    with urllib.request.urlopen(url, timeout=60) as r:
        return float(json.loads(r.read())["queue_full"])


# -- command start times ------------------------------------------------------------------------------------
def command_starts(site: Path, runs: int) -> list[tuple[str, float, float, float]]:
    """Wall time of `pretreat --help`, of each subcommand's `--help` (its module imported and its parser
    built: what every start of it pays before doing its work), and of `check-config` on the demo site and on the
    benchmark's site of 100 control manholes (100 sites, 1,000 channels, each site its permit); with the
    bytecode the install writes (scripts/compile_bytecode.py), and the CPU time without any (every imported
    module compiled from source: a venv without it, where Python writes none)."""
    from monitor.cli import SUBCOMMANDS

    # what the `pretreat` entry point runs, on this checkout's code
    base = [PY, "-c", "import sys; from monitor.cli import main; sys.exit(main())"]
    demo = str(ROOT / "config" / "sites" / "demo.toml")
    cases = ([["--help"]] + [[name, "--help"] for name in SUBCOMMANDS]
             + [["check-config", demo], ["check-config", str(site)]])
    cold = [PY, "-c", _NO_BYTECODE + "from monitor.cli import main; sys.exit(main())"]
    out = []
    for case in cases:
        times, cpus, colds = [], [], []
        for _ in range(runs):
            secs, cpu = _timed([*base, *case])
            times.append(secs)
            cpus.append(cpu)
            colds.append(_timed([*cold, *case])[1])
        out.append((" ".join(["pretreat", *case]).replace(str(site), "SITE").replace(demo, "config/sites/demo.toml"),
                    statistics.median(times), statistics.median(cpus), statistics.median(colds)))
    return out


# Run first in the "no bytecode" starts: the bytecode of the venv's and the project's modules is looked for where
# there is none (the name Python's import system looks up, patched), and none is written, so each of them is
# compiled from source at import; the standard library's, which ships with Python, is used.
_NO_BYTECODE = f"""import sys, importlib._bootstrap_external as b
_cfs, _ours = b.cache_from_source, (sys.prefix, {str(ROOT)!r})
def _none(path, *a, **k):
    return "/nonexistent/no.pyc" if str(path).startswith(_ours) else _cfs(path, *a, **k)
b.cache_from_source = _none
sys.dont_write_bytecode = True
"""


def _timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``argv``."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, capture_output=True, check=False, timeout=120)
    secs = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return secs, after.ru_utime - c.ru_utime + after.ru_stime - c.ru_stime


# -- the run ------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=5, help="flat-out measurements of each peer (median, paired)")
    ap.add_argument("--paced-runs", type=int, default=3, help="measurements of each peer at each paced load")
    ap.add_argument("--seconds", type=float, default=25.0, help="measuring window")
    ap.add_argument("--warm", type=float, default=8.0, help="s after the first reads before measuring")
    ap.add_argument("--small", type=int, default=100, help="devices flat out and paced (small)")
    ap.add_argument("--large", type=int, default=1000, help="devices paced (large)")
    ap.add_argument("--starts", type=int, default=5, help="runs of each command start (median)")
    ap.add_argument("--loads", default="flat,small,large",
                    help="which loads, comma-separated: flat, small (paced --small × 1 s), large (paced --large × 1 s)")
    ap.add_argument("--sim-devices", type=int, default=250,
                    help="devices a simulator process serves at most (more devices: more processes)")
    ap.add_argument("--skip-node-red", action="store_true", help="no npm, no Node-RED (the other peers only)")
    args = ap.parse_args()
    load_before = os.getloadavg()
    versions = "not run"
    if not args.skip_node_red:
        install()
        versions = node_red_versions()
    every = {"flat": ("flat out", args.small, 0.0), "small": (f"paced {args.small} × 1 s", args.small, 1.0),
             "large": (f"paced {args.large:,} × 1 s", args.large, 1.0)}
    loads = [every[key] for key in args.loads.split(",")]
    peers: list[tuple[str, Callable[..., Figures]]] = [("the daemon", run_daemon), ("bare pymodbus", run_bare)]
    if not args.skip_node_red:
        peers = [("Node-RED default", lambda *a: run_node_red(*a, buffer_commands=True)),
                 ("Node-RED, queue off", lambda *a: run_node_red(*a, buffer_commands=False)), *peers]
    results: dict[tuple[str, str], list[Figures]] = {}
    failed: dict[tuple[str, str], str] = {}
    served: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for load, devices, interval in loads:
            ports = free_ports(devices)
            sims = start_sims(workdir, ports, args.sim_devices)
            served[load] = (f"{len(sims)} simulator process(es) (`python -m simulators.modbus_server`), "
                            f"{len(ports) // len(sims):,} devices each")
            try:
                for run in range(args.runs if interval == 0 else args.paced_runs):
                    # the order reversed every other run: a machine slowing or speeding up over a run then
                    # favours no peer of a pair (the daemon is measured next to bare pymodbus either way)
                    for name, fn in (peers if run % 2 == 0 else peers[::-1]):
                        wanted = FLAT if (interval == 0 and name == "the daemon") else interval
                        try:
                            fig = fn(workdir, ports, wanted, args.seconds, args.warm)
                        except (RuntimeError, OSError) as exc:  # one peer failing must not lose the others
                            failed[(load, name)] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                            print(f"run {run + 1}, {load}, {name}: FAILED {failed[(load, name)]}",
                                  file=sys.stderr, flush=True)
                            continue
                        fig.extra["run"] = run  # for the paired ratios
                        results.setdefault((load, name), []).append(fig)
                        print(f"run {run + 1}, {load}, {name}: {fig.reads_per_s:,.0f} reads/s, "
                              f"{fig.cpu_pct:.1f} % CPU, {fig.us_per_read:.0f} µs a read, {fig.rss_mb:.0f} MB, "
                              f"{fig.errors} errors {fig.extra}", file=sys.stderr, flush=True)
            finally:
                for sim in sims:
                    stop(sim)
        starts = command_starts(write_site(workdir, free_ports(args.small), 1.0, judged=True), args.starts)
    return report(args, results, failed, [name for name, _ in peers], loads, starts, versions, load_before, served,
                  (every["flat"][0], every["small"][0], every["large"][0]))


def med(figs: list[Figures], attr: str) -> float:
    """Median of a figure (an attribute, or one of ``extra``'s keys) over the runs."""
    return statistics.median(f.extra[attr] if attr in f.extra else getattr(f, attr) for f in figs)


STALE_WHY = ("STALE samples are the daemon's own, not readings: the clock tick records one for a channel with no "
             "good reading within its window (one poll interval plus the 1 s timeout), so they are counted apart "
             "from polls × 10. They come at start-up, before a device's first reply, and flat out when a loaded "
             "machine delays a reply past the window; at the paced loads a steady run has none.")


def report(args: argparse.Namespace, results: dict[tuple[str, str], list[Figures]],
           failed: dict[tuple[str, str], str], names: list[str],
           loads: list[tuple[str, int, float]], starts: list[tuple[str, float, float, float]], versions: str,
           load_before: tuple[float, float, float], served: dict[str, str],
           labels: tuple[str, str, str]) -> int:
    """Print the tables and the goals; return the exit status: 1 when a daemon run stored other than polls × 10
    readings or a peer produced no figures at a load (the run cannot be trusted), else 0."""
    load_after = os.getloadavg()
    print(f"machine: {machine()}")
    print(f"Node-RED: {versions}")
    print(f"load average before / after: {' / '.join(f'{x:.2f}' for x in load_before)} → "
          f"{' / '.join(f'{x:.2f}' for x in load_after)} (1 / 5 / 15 min; other work shared the 2 cores, so "
          "absolute figures move run to run; the ratios are from the same run, measured back to back, the "
          "peers' order reversed every other run)")
    print(f"medians of {args.runs} flat-out run(s) and {args.paced_runs} run(s) of each paced load, "
          f"{args.seconds:g} s windows after {args.warm:g} s of warm-up; CPU is the process's own (all threads), "
          "% of one core; the simulator processes are not counted")
    for load, how in served.items():
        print(f"{load}: served by {how}")
    print()
    print("| load | peer | reads/s | CPU % of a core | CPU µs a read | RSS MB | errors (window) | notes |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    problems: list[str] = []
    for load, devices, interval in loads:
        for name in names:
            figs = results.get((load, name))
            if not figs:
                print(f"| {load} | {name} | failed | | | | | {failed.get((load, name), '')} |")
                problems.append(f"{name}, {load}: no figures ({failed.get((load, name), 'not run')})")
                continue
            notes = [f"failed once: {failed[(load, name)]}"] if (load, name) in failed else []
            if interval:  # a paced peer answers for the reads it was due, not only for those it made
                due = devices / interval
                short = due - med(figs, "reads_per_s")
                if short > 0.005 * due:
                    notes.append(f"{short:,.0f} reads/s short of the {due:,.0f} due")
            if name.startswith("Node-RED"):
                notes.append(f"'Queue full' rejections since start: {max(f.extra['queue_full'] for f in figs):,.0f}")
            if name == "the daemon":
                missing = [int(f.extra["missing"]) for f in figs]
                if any(missing):
                    problems.append(f"the daemon, {load}: stored readings other than polls × 10, run by run "
                                    f"{missing} (positive: missing; negative: more than polled)")
                notes.append(f"event-loop lag p99 (last 30 s) {med(figs, 'lag_p99_ms'):.1f} ms; stored readings "
                             f"missing vs polls × 10, run by run: {', '.join(map(str, missing))}; STALE samples "
                             f"of the tick, apart: {', '.join(str(int(f.extra['stale'])) for f in figs)}; episode "
                             f"events {', '.join(str(int(f.extra['episode_events'])) for f in figs)} and alarms "
                             f"active {', '.join(str(int(f.extra['alarms_active'])) for f in figs)} (each flow "
                             "meter's slug_no_baseline notice: no baseline in a new record)")
            print(f"| {load} | {name} | {med(figs, 'reads_per_s'):,.0f} | {med(figs, 'cpu_pct'):.1f} | "
                  f"{med(figs, 'us_per_read'):.0f} | {med(figs, 'rss_mb'):.0f} | "
                  f"{sum(f.errors for f in figs):,} | {'; '.join(notes)} |")
    print()
    print(STALE_WHY)
    print()
    goals = ratios(results, labels)
    print(f"\n| command start, median of {args.starts} | wall s | CPU s (user + system) | CPU s, no bytecode |"
          "\n|---|---:|---:|---:|")
    for cmd, secs, cpu, cold in starts:
        print(f"| `{cmd}` | {secs:.3f} | {cpu:.3f} | {cold:.3f} |")
    slowest = max(s[2] for s in starts)
    print(f"\nslowest start: {max(s[1] for s in starts):.3f} s wall, {slowest:.3f} s CPU "
          "(goal < 0.4 s; wall time waits for the shared cores, CPU time does not); "
          f"without bytecode {max(s[3] for s in starts):.3f} s CPU: {'met' if slowest < 0.4 else 'NOT MET'}")
    goals.append(slowest < 0.4)
    print(f"\ngoals met: {sum(goals)} of {len(goals)} measured")
    for problem in problems:
        print(f"NOT A VALID RUN: {problem}")
    return 1 if problems else 0


def paired(results: dict[tuple[str, str], list[Figures]], load: str, peer: str) -> list[float]:
    """The daemon's reads/s over ``peer``'s, run by run (the two measured back to back in the same run): the
    machine's load moves both together, so these vary less than a ratio of medians taken at different
    moments."""
    ours = {f.extra["run"]: f.reads_per_s for f in results.get((load, "the daemon"), [])}
    theirs = {f.extra["run"]: f.reads_per_s for f in results.get((load, peer), [])}
    return [ours[r] / theirs[r] for r in ours if theirs.get(r)]


Goal = tuple[str, str, str, bool | None]  # what, the value shown, the goal, met (None: not measured)


def goal_rows(results: dict[tuple[str, str], list[Figures]], loads: tuple[str, str, str]) -> list[Goal]:
    """The issue's goals; ``loads`` the labels of flat out, paced small and paced large. Flat out, a goal is the
    median of the paired runs' own ratios (the ratio of medians shown beside it); with one run, that run's."""
    def value(load: str, name: str, attr: str) -> float | None:
        figs = results.get((load, name))
        return med(figs, attr) if figs else None

    flat, small, large = loads
    rows: list[Goal] = []

    def row(label: str, v: float | None, shown: str, goal: str, ok: Callable[[float], bool]) -> None:
        rows.append((label, shown if v is not None else "not measured", goal, None if v is None else ok(v)))

    for peer, most, goal in (("Node-RED default", 0.5, "≤ 0.5"), ("Node-RED, queue off", 1.0, "≤ 1")):
        a, b = value(small, "the daemon", "cpu_pct"), value(small, peer, "cpu_pct")
        r = a / b if a is not None and b else None
        row(f"daemon CPU / {peer} CPU, {small}", r, f"{r:.2f}" if r is not None else "", goal,
            lambda v, most=most: v <= most)
    for peer, least, goal in (("Node-RED default", 2.0, "≥ 2"), ("bare pymodbus", 0.7, "≥ 0.7")):
        a, b = value(flat, "the daemon", "reads_per_s"), value(flat, peer, "reads_per_s")
        pairs = paired(results, flat, peer)
        r = statistics.median(pairs) if pairs else None
        shown = (f"{r:.2f} (range {min(pairs):.2f}–{max(pairs):.2f}; ratio of medians {a / b:.2f})"
                 if r is not None and a is not None and b else "")
        row(f"daemon reads/s / {peer} reads/s, {flat}, median of the {len(pairs)} paired runs' own ratios",
            r, shown, goal, lambda v, least=least: v >= least)
    rss = value(small, "the daemon", "rss_mb")
    row(f"daemon RSS, {small}", rss, f"{rss:.0f} MB" if rss is not None else "", "≤ 60 MB", lambda v: v <= 60)
    cpu = value(large, "the daemon", "cpu_pct")
    row(f"daemon CPU, {large}", cpu, f"{cpu:.1f} %" if cpu is not None else "", "< 25 %", lambda v: v < 25)
    lag = value(large, "the daemon", "lag_p99_ms")
    row(f"daemon event-loop lag p99, {large}", lag, f"{lag:.1f} ms" if lag is not None else "", "< 20 ms",
        lambda v: v < 20)
    return rows


def ratios(results: dict[tuple[str, str], list[Figures]], loads: tuple[str, str, str]) -> list[bool]:
    """Print the goals' table; return whether each measured goal was met."""
    print("| goal (medians, same run) | value | goal | met? |\n|---|---:|---|---|")
    met: list[bool] = []
    for label, shown, goal, ok in goal_rows(results, loads):
        print(f"| {label} | {shown} | {goal} | {'—' if ok is None else 'met' if ok else 'NOT MET'} |")
        if ok is not None:
            met.append(ok)
    return met


if __name__ == "__main__":
    sys.exit(main())
