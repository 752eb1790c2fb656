"""`pretreat replay`: CSV in, time-sorted JSON Lines out, rejected rows reported by line, exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.checks.events import EpisodeEvent
from monitor.checks.replay_io import SortedEvents, time_parser
from monitor.cli import main
from tests.unit.checks_helpers import (
    REPLAY_SITE,
    channel,
    load,
    replayed,
    run_replay,
    site_toml,
    ts,
    write_file,
)


def test_episodes_sorted_by_time_across_channels_written_one_after_the_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "time,channel,value\n" + "".join(f"{ts(i)},lel,{v}\n" for i, v in enumerate([1, 12, 1]))
    text += "".join(f"{ts(i)},ph,{v}\n" for i, v in enumerate([7, 4, 7]))
    code, events, err = run_replay(tmp_path, text, capsys)
    assert code == 0
    assert [(e["time"], e["channel"], e["rule"], e["event"]) for e in events] == [
        (ts(1), "lel", "lel_single", "start"),
        (ts(1), "ph", "ph_low", "start"),
        (ts(2), "lel", "lel_single", "end"),
        (ts(2), "ph", "ph_low", "end"),
    ]
    assert events[0] == {
        "time": ts(1),
        "site": "acme",
        "channel": "lel",
        "rule": "lel_single",
        "event": "start",
        "value": 12.0,
        "limit": 10.0,
        "citation": "Town of Southeast § 112-5A(1)(a)",
    }
    assert events[2]["peak"] == 12.0
    assert (
        "rows read: 6\nrows rejected: 0\nexceedance episodes: lel_single 1 (open 0), ph_low 1 (open 0)" in err
    )


def test_bad_rows_are_reported_with_line_numbers_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        f"time,channel,value\n{ts(0)},ph,7\n{ts(1)},ph,abc\n{ts(2)},xx,1\n2025-03-03T00:00:03,ph,7\n"
        f"{ts(5)},ph,4\n{ts(4)},ph,7\n{ts(6)},ph,7,extra\n{ts(7)},ph,4.5\n"
    )
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert "readings.csv:3: skipped (unparseable)" in err
    assert "readings.csv:4: skipped (unknown channel): 'xx'" in err
    assert "readings.csv:5: skipped (unparseable): time '2025-03-03T00:00:03': " in err
    assert "time without offset" in err
    assert "readings.csv:7: skipped (out of order)" in err
    assert "readings.csv:8: skipped (unparseable)" in err
    assert "rows read: 8\nrows rejected: 5; out of order 1; unknown channel 1; unparseable 3" in err
    assert [(e["time"], e["event"]) for e in events] == [(ts(5), "start")]  # still open: no end
    assert "ph_low 1 (open 1)" in err


def test_quoted_rows_switch_to_the_csv_tokenizer_and_keep_line_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        f'time,channel,value\n{ts(0)},ph,7\n"{ts(1)}","ph","4"\n{ts(2)},"p\nh",4\n{ts(3)},ph,7\n'
        f"{ts(4)},ph,nope\n"
    )
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert [(e["time"], e["event"]) for e in events] == [(ts(1), "start"), (ts(3), "end")]
    assert "readings.csv:4: skipped (unknown channel): 'p\\nh'" in err  # a field spanning lines 4-5
    assert "readings.csv:7: skipped (unparseable)" in err


def test_quality_site_and_extra_columns_as_pretreat_readings_exports_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "time,site,channel,value,unit,quality,reason\n"
        f"{ts(0)},acme,ph,7.0,pH,good,\n{ts(60)},acme,ph,,pH,stale,no good reading for 61.0 s\n"
        f"{ts(90)},acme,ph,,pH,comm_failure,timeout\n{ts(120)},acme,ph,4.0,pH,good,\n"
        f"{ts(130)},other,ph,4.0,pH,good,\n{ts(140)},acme,ph,,pH,STRANGE WORD,\n{ts(150)},acme,ph,7.0,pH,,\n"
    )
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert [(e["time"], e["rule"], e["event"]) for e in events] == [
        (ts(60), "stale", "start"),
        (ts(120), "ph_low", "start"),
        (ts(120), "stale", "end"),
        (ts(150), "ph_low", "end"),
    ]
    assert "readings.csv:6: skipped (unknown channel): site 'other' channel 'ph'" in err
    assert "data-quality episodes: stale 1 (open 0)" in err


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good_site = write_file(tmp_path, "site.toml", REPLAY_SITE)
    bad_site = write_file(tmp_path, "bad.toml", site_toml(channel("ph"), jurisdiction="pawling"))
    data = write_file(tmp_path, "r.csv", f"time,channel,value\n{ts(0)},ph,7\n")
    assert main(["replay", "--config", str(bad_site), str(data)]) == 2
    assert "permit.limits.ph_min" in capsys.readouterr().err
    assert main(["replay", "--config", str(good_site), str(tmp_path / "missing.csv")]) == 1
    assert (
        main(["replay", "--config", str(good_site), str(write_file(tmp_path, "h.csv", "when,what\n1,2\n"))]) == 1
    )
    assert "lacks ['time', 'channel', 'value']" in capsys.readouterr().err
    assert main(["replay", "--config", str(good_site), str(write_file(tmp_path, "e.csv", ""))]) == 1
    assert (
        main(["replay", "--config", str(good_site), str(data), "--output", str(tmp_path / "no/dir/x")]) == 1
    )


def test_several_sites_need_a_site_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    second = site_toml(channel("ph"), site="beta").split("[[site]]", 1)[1]
    cfg = write_file(tmp_path, "two.toml", REPLAY_SITE + "\n[[site]]" + second)
    data = write_file(tmp_path, "r.csv", f"time,channel,value\n{ts(0)},ph,7\n")
    assert main(["replay", "--config", str(cfg), str(data)]) == 1
    assert "no 'site' column, but the site file has 2 sites" in capsys.readouterr().err
    data2 = write_file(tmp_path, "r2.csv", f"time,site,channel,value\n{ts(0)},beta,ph,4\n{ts(0)},acme,ph,7\n")
    assert main(["replay", "--config", str(cfg), str(data2), "--output", str(tmp_path / "o.jsonl")]) == 0
    assert json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])["site"] == "beta"


def test_time_parser_matches_fromisoformat() -> None:
    parse = time_parser()
    for text in [
        "2025-03-09T06:59:59Z",
        "2025-03-09T07:00:00+00:00",
        "2025-03-09T02:30:00-05:00",
        "2025-11-02T01:30:00-04:00",
        "2025-11-02T01:30:00-05:00",
        "2025-03-09T07:00:00.250Z",
        "2025-03-09 07:00:00Z",
        "2024-02-29T23:59:59+14:00",
    ]:
        from datetime import datetime

        assert parse(text) == datetime.fromisoformat(text).timestamp(), text
        assert parse(text) == parse(text)  # cached the second time
    for bad in [
        "2025-03-09T07:00:60Z",
        "2025-03-09T07:00:0xZ",
        "2025-03-09T07:00:00",
        "yesterday",
        "2025-03-09T07:00X00Z",
        "2025-02-30T00:00:00Z",
    ]:
        with pytest.raises(ValueError):
            parse(bad)


def test_sorted_events_spill_to_disk_and_merge_in_order() -> None:
    events = [
        EpisodeEvent(float((i * 7919) % 1000), "s", "c", "r", "start", float(i), None, "x")
        for i in range(1000)
    ]
    small, big = io.StringIO(), io.StringIO()
    a, b = SortedEvents(small, spill_at=64), SortedEvents(big)
    for k in range(0, 1000, 50):
        a.add(events[k : k + 50])
        b.add(events[k : k + 50])
    assert len(a.runs) > 5
    assert a.close() == b.close() == 1000
    assert small.getvalue() == big.getvalue()
    times = [json.loads(x)["time"] for x in small.getvalue().splitlines()]
    assert times == sorted(times)


def test_replay_function_returns_counts(tmp_path: Path) -> None:
    config = load(tmp_path, REPLAY_SITE)
    events, err = replayed(config, f"time,channel,value\n{ts(0)},lel,6\n{ts(1)},lel,6\n")
    assert [e["rule"] for e in events] == ["lel_successive"]
    assert "rows read: 2" in err


def test_the_installed_command_runs(tmp_path: Path) -> None:
    cfg = write_file(tmp_path, "site.toml", REPLAY_SITE)
    data = write_file(tmp_path, "r.csv", f"time,channel,value\n{ts(0)},ph,4\n")
    proc = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "replay", "--config", str(cfg), str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rule"] == "ph_low"
    assert "rows read: 1" in proc.stderr


def test_export_layout_with_quoted_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pretreat readings` quotes a reason holding a comma (one line) or a newline (two lines)."""
    text = (
        "time,site,channel,value,unit,quality,reason\n"
        f'{ts(0)},acme,ph,,pH,device_exception,"exception code 2, illegal address"\n'
        f"{ts(10)},acme,ph,4.0,pH,good,\n"
        f'{ts(20)},acme,ph,,pH,decode_error,"short reply\nof 3 bytes"\n'
        f"{ts(30)},acme,ph,7.0,pH,good,\n"
        f"{ts(40)},acme,ph,oops,pH,good,\n"
    )
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert [(e["time"], e["rule"], e["event"]) for e in events] == [
        (ts(0), "sensor_fault", "start"), (ts(10), "ph_low", "start"), (ts(10), "sensor_fault", "end"),
        (ts(20), "sensor_fault", "start"), (ts(30), "ph_low", "end"), (ts(30), "sensor_fault", "end")]
    assert "readings.csv:7: skipped (unparseable)" in err  # the two-line reason took lines 4-5
    assert "rows read: 5\n" in err
