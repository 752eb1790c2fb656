"""`make bench`: every benchmark in bench/ (each ``bench/bench_*.py``), one after the other, with its default
arguments, and one report, bench/RESULTS.md: the machine, the date, the commit, then for each benchmark the
command that ran and the table it printed. A benchmark that fails is reported as failed, with its exit code and
the end of its error output; the others still run. Nothing is timed in parallel: run it on an idle machine.

    .venv/bin/python bench/run_all.py [--smoke] [--only NAME ...] [--output FILE] [--timeout S]

Below the generated part, bench/RESULTS.md keeps the runs made by hand (a benchmark with other arguments, a
comparison of two commits, a profile): everything from the line `HAND_RUNS` on is carried over into the new
report, so `make bench` replaces only its own part and loses none of them.

``--smoke`` runs each benchmark with small arguments (`SMOKE_ARGS`, or a ``SMOKE_ARGS = [...]`` list in the
benchmark's own file) to check that the whole report works end to end in a few minutes; its numbers mean
nothing, so it writes bench/out/RESULTS-smoke.md unless ``--output`` says otherwise. The soak run
(bench/soak.py, 30 minutes) is not part of this: run it by itself.
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import shlex
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# The line above the hand-run sections of bench/RESULTS.md: it and what follows it survive a new report
HAND_RUNS = "<!-- Runs by hand, kept by `make bench` (bench/run_all.py): add new ones at the end. -->"


def kept_hand_runs(output: Path) -> str:
    """What ``output`` holds from `HAND_RUNS` on ("" when it has no such line or does not exist)."""
    try:
        text = output.read_text()
    except FileNotFoundError:
        return ""
    at = text.find(HAND_RUNS)
    return "" if at < 0 else "\n" + text[at:]

# Small arguments per benchmark for --smoke (a benchmark can also declare its own SMOKE_ARGS list).
SMOKE_ARGS: dict[str, list[str]] = {
    "bench_alarm_latency": ["--trials", "3", "--runs", "1"],
    "bench_console": ["--runs", "1", "--clients", "2"],
    "bench_exceedances": ["--episodes", "2000", "--runs", "1"],
    "bench_historian": ["--runs", "1", "--ingest", "20000", "--days", "1"],
    "bench_influx": ["--points", "20000", "--cpu-points", "10000", "--runs", "1"],
    "bench_journal": ["--runs", "1", "--batched", "2000", "--single", "100"],
    "bench_polling": ["--runs", "1", "--seconds", "3", "--devices", "10"],
    "bench_replay": ["--rows", "20000", "--runs", "1"],
    "bench_report": ["--runs", "1", "--days", "7"],
}


@dataclass
class Outcome:
    name: str
    command: list[str]
    summary: str  # the first sentence of the benchmark's docstring
    status: str  # "ok", "failed (exit N)", "timed out after S s", "skipped: why"
    seconds: float
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        return not self.ok and not self.status.startswith("skipped")


def benchmarks(only: list[str] | None) -> list[Path]:
    found = sorted(BENCH.glob("bench_*.py"))
    if only:
        wanted = {n.removesuffix(".py") for n in only}
        unknown = wanted - {p.stem for p in found}
        if unknown:
            raise SystemExit(f"no such benchmark: {', '.join(sorted(unknown))} (have {[p.stem for p in found]})")
        found = [p for p in found if p.stem in wanted]
    return found


def module_info(path: Path) -> tuple[str, list[str] | None]:
    """The first paragraph of the module docstring, and its own SMOKE_ARGS if it declares a literal list."""
    tree = ast.parse(path.read_text())
    doc = " ".join((ast.get_docstring(tree) or "").strip().split("\n\n", 1)[0].split())
    smoke = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SMOKE_ARGS"
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                smoke = value
    return doc, smoke


def run_one(path: Path, *, smoke: bool, timeout: float) -> Outcome:
    summary, own_smoke = module_info(path)
    args: list[str] = []
    if smoke:
        found = own_smoke if own_smoke is not None else SMOKE_ARGS.get(path.stem)
        if found is None:
            return Outcome(path.stem, [], summary, "skipped: no smoke arguments known (add SMOKE_ARGS to it)",
                           0.0, "", "")
        args = found
    command = [sys.executable, str(path.relative_to(ROOT)), *args]
    shown = ["python", *command[1:]]
    print(f"== {path.stem}: {shlex.join(shown)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return Outcome(path.stem, shown, summary, f"timed out after {timeout:g} s", time.monotonic() - started,
                       out, err)
    seconds = time.monotonic() - started
    status = "ok" if done.returncode == 0 else f"failed (exit {done.returncode})"
    print(f"   {status} in {seconds:.0f} s", file=sys.stderr, flush=True)
    return Outcome(path.stem, shown, summary, status, seconds, done.stdout, done.stderr)


def machine() -> list[str]:
    """What the numbers were measured on."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in _read("/proc/cpuinfo").splitlines()
                if ln.startswith("model name")), platform.processor() or "unknown CPU")
    mem = next((int(ln.split()[1]) / 1024 / 1024 for ln in _read("/proc/meminfo").splitlines()
                if ln.startswith("MemTotal:")), float("nan"))
    os_name = next((ln.split("=", 1)[1].strip('"') for ln in _read("/etc/os-release").splitlines()
                    if ln.startswith("PRETTY_NAME=")), platform.system())
    versions = ", ".join(f"{p} {_version(p)}" for p in ("pymodbus", "paho-mqtt", "influxdb-client", "numpy"))
    return [
        f"- CPU: {cpu}, {os.cpu_count()} logical cores; memory {mem:.1f} GiB",
        f"- OS: {os_name}, kernel {platform.release()}",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; {versions}",
        f"- load average before the first benchmark: {' / '.join(f'{x:.2f}' for x in os.getloadavg())} "
        "(1 / 5 / 15 min)",
    ]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head}{' with uncommitted changes' if dirty else ''}"


def report(outcomes: list[Outcome], *, smoke: bool, started: datetime, header: list[str]) -> str:
    lines = ["# Benchmark results", ""]
    if smoke:
        lines += ["**Smoke run** (`--smoke`): tiny arguments, to check the report end to end. The numbers below "
                  "mean nothing; `make bench` gives the real ones.", ""]
    lines += [f"Run {started:%Y-%m-%d %H:%M} UTC by `make bench` (`python bench/run_all.py"
              f"{' --smoke' if smoke else ''}`), commit {commit()}, each benchmark with its default arguments "
              "unless shown otherwise, one at a time.", "", "Machine:", "", *header, "",
              "| benchmark | what it measures | status | wall time |", "|---|---|---|---:|"]
    for o in outcomes:
        lines.append(f"| [{o.name}](#{o.name}) | {o.summary} | "
                     f"{'ok' if o.ok else '**' + o.status + '**'} | {o.seconds:.0f} s |")
    for o in outcomes:
        lines += ["", f"## {o.name}", "", o.summary, ""]
        if o.command:
            lines += [f"`{shlex.join(o.command)}`", ""]
        if not o.ok:
            lines += [f"**{o.status}.**", ""]
        if o.stdout.strip():
            lines += [o.stdout.rstrip(), ""] if o.ok else ["Its output:", "", "```", o.stdout.rstrip(), "```", ""]
        if not o.ok and o.stderr.strip():
            tail = "\n".join(o.stderr.rstrip().splitlines()[-30:])
            lines += ["The end of its error output:", "", "```", tail, "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--smoke", action="store_true", help="small arguments: check the report works, quickly")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="just these benchmarks (e.g. bench_journal)")
    ap.add_argument("--output", type=Path, help="report file (default bench/RESULTS.md; smoke: "
                                                "bench/out/RESULTS-smoke.md)")
    ap.add_argument("--timeout", type=float, default=None, metavar="S",
                    help="per benchmark (default 3600 s; smoke 600 s)")
    args = ap.parse_args()
    output = args.output or (BENCH / "out" / "RESULTS-smoke.md" if args.smoke else BENCH / "RESULTS.md")
    timeout = args.timeout or (600.0 if args.smoke else 3600.0)
    started = datetime.now(tz=UTC)
    header = machine()
    outcomes: list[Outcome] = []
    try:
        for path in benchmarks(args.only):
            outcomes.append(run_one(path, smoke=args.smoke, timeout=timeout))
    except KeyboardInterrupt:
        outcomes.append(Outcome("interrupted", [], "the run was interrupted (Ctrl-C)", "interrupted", 0.0, "", ""))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report(outcomes, smoke=args.smoke, started=started, header=header)
                      + kept_hand_runs(output))
    failed = [o.name for o in outcomes if o.failed]
    skipped = [o.name for o in outcomes if not o.ok and not o.failed]
    print(f"wrote {output}: {sum(o.ok for o in outcomes)} of {len(outcomes)} benchmarks ok"
          + (f"; failed: {', '.join(failed)}" if failed else "")
          + (f"; skipped: {', '.join(skipped)}" if skipped else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
