"""The benchmark reports' own logic: `make bench` keeps the runs made by hand in bench/RESULTS.md, and
bench_peers judges its goals and refuses a run in which the daemon lost readings."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import bench_peers, run_all
from bench.bench_peers import Figures


def test_make_bench_keeps_the_runs_made_by_hand(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    assert run_all.kept_hand_runs(results) == ""  # no report yet
    hand = f"{run_all.HAND_RUNS}\n\n## bench_peers by hand\n\nfigures\n"
    results.write_text("# Benchmark results\n\nthe generated part\n\n" + hand)
    kept = run_all.kept_hand_runs(results)
    assert kept.strip() == hand.strip()
    results.write_text("# Benchmark results\n\nno hand-run line\n")
    assert run_all.kept_hand_runs(results) == ""


def fig(reads: float, cpu: float, run: int, **extra: float) -> Figures:
    return Figures(reads_per_s=reads, cpu_pct=cpu, rss_mb=55.0, errors=0, extra={"run": run, **extra})


LOADS = ("flat out", "paced 100 × 1 s", "paced 1,000 × 1 s")


def daemon(reads: float, cpu: float, run: int, missing: int = 0) -> Figures:
    return fig(reads, cpu, run, lag_p99_ms=10.0, missing=missing, stale=0, episode_events=100, alarms_active=100)


def test_the_flat_out_goals_are_the_median_of_the_paired_runs_not_of_the_medians() -> None:
    # run by run the daemon is 0.9 and 0.5 of bare pymodbus (median 0.7), while the ratio of medians is 0.67
    results = {("flat out", "the daemon"): [daemon(900, 90, 0), daemon(700, 90, 1)],
               ("flat out", "bare pymodbus"): [fig(1000, 90, 0), fig(1400, 90, 1)]}
    rows = {label.split(",")[0]: (shown, ok) for label, shown, _goal, ok in bench_peers.goal_rows(results, LOADS)}
    shown, ok = rows["daemon reads/s / bare pymodbus reads/s"]
    assert shown.startswith("0.70 (range 0.50–0.90; ratio of medians 0.67)") and ok is True
    assert rows["daemon reads/s / Node-RED default reads/s"] == ("not measured", None)
    assert rows["daemon CPU"] == ("not measured", None)


def test_a_goal_missed_is_reported_not_met(capsys: pytest.CaptureFixture[str]) -> None:
    results = {("paced 1,000 × 1 s", "the daemon"): [daemon(1000, 26.0, 0)]}
    assert bench_peers.ratios(results, LOADS) == [False, True]  # CPU 26 % (goal < 25), lag 10 ms
    out = capsys.readouterr().out
    assert "| daemon CPU, paced 1,000 × 1 s | 26.0 % | < 25 % | NOT MET |" in out


def run_report(results: dict[tuple[str, str], list[Figures]]) -> int:
    args = argparse.Namespace(runs=1, paced_runs=1, seconds=10.0, warm=5.0, starts=1)
    loads = [("flat out", 100, 0.0), ("paced 100 × 1 s", 100, 1.0)]
    return bench_peers.report(args, results, {}, ["the daemon", "bare pymodbus"], loads,
                              [("pretreat --help", 0.1, 0.1, 0.1)], "not run", (0.0, 0.0, 0.0), {}, LOADS)


def test_a_run_where_the_daemon_lost_readings_or_a_peer_gave_nothing_fails(
        capsys: pytest.CaptureFixture[str]) -> None:
    whole = {("flat out", "the daemon"): [daemon(900, 90, 0)], ("flat out", "bare pymodbus"): [fig(1000, 90, 0)],
             ("paced 100 × 1 s", "the daemon"): [daemon(100, 2, 0)],
             ("paced 100 × 1 s", "bare pymodbus"): [fig(93, 6, 0)]}
    assert run_report(whole) == 0
    out = capsys.readouterr().out
    assert "7 reads/s short of the 100 due" in out  # a paced peer that fell behind says so
    assert "STALE samples are the daemon's own" in out
    lost = {**whole, ("paced 100 × 1 s", "the daemon"): [daemon(100, 2, 0, missing=30)]}
    assert run_report(lost) == 1
    assert "NOT A VALID RUN: the daemon, paced 100 × 1 s" in capsys.readouterr().out
    gone = {k: v for k, v in whole.items() if k != ("flat out", "bare pymodbus")}
    assert run_report(gone) == 1
    assert "NOT A VALID RUN: bare pymodbus, flat out: no figures" in capsys.readouterr().out
