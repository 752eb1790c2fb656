"""`pretreat replay` on bad input (issue 15): each row is a line, a bad row is rejected alone with its line and
reason, one implausible time cannot disorder a channel, only plain decimal numbers are values, and the command
fails when more than ``--max-rejected`` per cent of the rows are rejected."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.checks_helpers import REPLAY_SITE, channel, run_replay, site_toml, ts, write_file

EXPORT = "time,site,channel,value,unit,quality,reason\n"


def ph_rows(offsets: range, value: str = "7") -> str:
    return "".join(f"{ts(i)},ph,{value}\n" for i in offsets)


def test_a_stray_quote_rejects_its_own_line_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "time,channel,value\n" + ph_rows(range(0, 5)) + f'{ts(5)},ph,"4\n' + ph_rows(range(6, 200), "4")
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert "readings.csv:7: skipped (unparseable): unbalanced quote: " in err
    assert "rows read: 200\nrows rejected: 1; unparseable 1" in err
    assert [(e["time"], e["event"]) for e in events] == [(ts(6), "start")]  # the rows after it were read


def test_a_field_over_the_csv_limit_is_one_rejected_row_quoted_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = "x" * 300_000
    text = "time,channel,value\n" + ph_rows(range(0, 3)) + f'{ts(3)},"{huge}",7\n' + ph_rows(range(4, 6), "4")
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    line = next(x for x in err.splitlines() if x.startswith(f"{tmp_path}/readings.csv:5:"))
    assert "skipped (unparseable): field larger than field limit (131072): " in line
    assert line.endswith("… (300,025 characters)") and len(line) < 400, line[:500]
    assert [(e["time"], e["event"]) for e in events] == [(ts(4), "start")]


@pytest.mark.parametrize("where", ["value", "channel"])
def test_an_oversized_unquoted_cell_is_quoted_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    huge = "9" * 100_000 + "z"
    row = f"{ts(1)},ph,{huge}\n" if where == "value" else f"{ts(1)},{huge},7\n"
    code, _events, err = run_replay(tmp_path, "time,channel,value\n" + ph_rows(range(0, 1)) + row, capsys, REPLAY_SITE,
                             "--max-rejected", "100")
    assert code == 0
    reported = [x for x in err.splitlines() if "readings.csv:3:" in x]
    assert len(reported) == 1 and len(reported[0]) < 400 and "(100,001 characters)" in reported[0]


def test_a_row_dated_9999_does_not_disorder_its_channel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "time,channel,value\n" + ph_rows(range(0, 10)) + "9999-12-31T00:00:00Z,ph,7\n" + ph_rows(range(10, 20), "4")
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert "readings.csv:12: skipped (implausible time): 9999-12-31T00:00:00Z is more than 300 s after now" in err
    assert "out of order" not in err
    assert [(e["time"], e["event"]) for e in events] == [(ts(10), "start")]


def test_a_misdated_row_beyond_the_data_is_rejected_and_a_real_gap_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row months after the rows around it (but not in the future) is held, then rejected when the next
    rows come back; a real gap (both channels silent for 3 h) is confirmed by the rows after it and read."""
    month = 30 * 86400
    text = "time,channel,value\n" + "".join(f"{ts(i)},ph,7\n{ts(i)},lel,1\n" for i in range(0, 10))
    text += f"{ts(month)},ph,7\n"  # line 22: misdated
    text += "".join(f"{ts(i)},ph,7\n{ts(i)},lel,1\n" for i in range(10, 20))
    text += "".join(f"{ts(i)},ph,4\n{ts(i)},lel,1\n" for i in range(3 * 3600, 3 * 3600 + 10))  # after a gap
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert re.search(r"readings.csv:22: skipped \(implausible time\): \S+ is 720.0 h after the rows before it "
                     r"and the next row of its channel is back at", err), err
    assert "rows rejected: 1; implausible time 1" in err and "out of order" not in err
    assert [(e["time"], e["rule"], e["event"]) for e in events] == [(ts(3 * 3600), "ph_low", "start")]


def test_hourly_data_is_read_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every row of sparse data is beyond the frontier: held in fours, confirmed, read in file order."""
    rows = [(h, "4" if h in (5, 6) else "7") for h in range(0, 11)]
    text = "time,channel,value\n" + "".join(f"{ts(h * 3600)},ph,{v}\n" for h, v in rows)
    hourly = site_toml(channel("ph", max_gap=3600))  # an hourly meter: an hour between readings is no gap
    code, events, err = run_replay(tmp_path, text, capsys, hourly)
    assert code == 0 and "rows read: 11\nrows rejected: 0" in err
    assert [(e["time"], e["event"]) for e in events] == [(ts(5 * 3600), "start"), (ts(7 * 3600), "end")]


@pytest.mark.parametrize("value", ["1_000", "4_0", "infinity", "Infinity", "+inf", "INF", "nan", " 5", "5 ", "٣",
                                   "0x10", " inf"])
@pytest.mark.parametrize("layout", ["plain", "export"])
def test_only_plain_decimal_numbers_are_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, layout: str
) -> None:
    if layout == "plain":
        text = f"time,channel,value\n{ts(0)},ph,7\n{ts(1)},ph,{value}\n{ts(2)},ph,4\n"
    else:
        text = f"{EXPORT}{ts(0)},acme,ph,7,pH,good,\n{ts(1)},acme,ph,{value},pH,good,\n{ts(2)},acme,ph,4,pH,good,\n"
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0
    assert "readings.csv:3: skipped (unparseable): value " in err and "is not a plain decimal number" in err
    assert "rows rejected: 1; unparseable 1" in err
    assert [(e["time"], e["event"]) for e in events] == [(ts(2), "start")]


@pytest.mark.parametrize("value", ["inf", "-inf"])
@pytest.mark.parametrize("layout", ["plain", "export"])
def test_the_exports_own_infinity_is_judged_as_the_bad_value_the_daemon_made_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, layout: str
) -> None:
    """`pretreat readings` writes a stored infinite number ``inf``/``-inf``: read back, it is no rejected row but
    the bad reading the engine judged it (``bad_value``: a sensor fault), which neither ends nor splits the pH
    excursion around it."""
    if layout == "plain":
        text = f"time,channel,value\n{ts(0)},ph,4\n{ts(1)},ph,{value}\n{ts(2)},ph,4\n{ts(3)},ph,7\n"
    else:
        text = (f"{EXPORT}{ts(0)},acme,ph,4,pH,good,\n{ts(1)},acme,ph,{value},pH,good,\n"
                f"{ts(2)},acme,ph,4,pH,good,\n{ts(3)},acme,ph,7,pH,good,\n")
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE)
    assert code == 0 and "rows read: 4\nrows rejected: 0" in err, err
    assert [(e["time"], e["rule"], e["event"]) for e in events] == [
        (ts(0), "ph_low", "start"), (ts(1), "sensor_fault", "start"), (ts(2), "sensor_fault", "end"),
        (ts(3), "ph_low", "end")]


@pytest.mark.parametrize("value", ["7", "-0.5", ".25", "6.", "1e-05", "2.5E+3", "+3"])
def test_plain_numbers_in_every_form_repr_writes_are_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, _events, err = run_replay(tmp_path, f"time,channel,value\n{ts(0)},lel,{value}\r\n", capsys)
    assert code == 0 and "rows rejected: 0" in err


def test_more_than_the_stated_share_rejected_fails_after_the_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = ph_rows(range(0, 198))
    two_bad = good + f"{ts(198)},ph,x\n{ts(199)},ph,y\n"  # 2 of 200 = 1 %: not more than 1 %
    code, _events, err = run_replay(tmp_path, "time,channel,value\n" + two_bad, capsys)
    assert code == 0 and "rows rejected: 2" in err
    three_bad = two_bad + f"{ts(200)},ph,z\n"  # 3 of 201 > 1 %
    code, _events, err = run_replay(tmp_path, "time,channel,value\n" + three_bad, capsys)
    assert code == 3
    assert err.index("rows read: 201\nrows rejected: 3") < err.index("1.49 % of the rows were rejected")
    code, _events, err = run_replay(tmp_path, "time,channel,value\n" + three_bad, capsys, REPLAY_SITE,
                                    "--max-rejected", "2")
    assert code == 0


@pytest.mark.parametrize("header", ["time,channel,value", "time,channel,value,site,quality", EXPORT.strip()])
def test_every_layout_reads_the_same_with_either_line_ending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str
) -> None:
    rows = [(0, "7"), (1, "4"), (2, "4.5"), (3, "7.0")]
    template = {"time,channel,value": "{t},ph,{v}", "time,channel,value,site,quality": "{t},ph,{v},acme,good",
                EXPORT.strip(): "{t},acme,ph,{v},pH,good,"}[header]
    results = []
    for eol in ("\n", "\r\n"):
        text = header + eol + "".join(template.format(t=ts(i), v=v) + eol for i, v in rows)
        code, events, err = run_replay(tmp_path, text, capsys)
        assert code == 0 and "rows read: 4\nrows rejected: 0" in err, err
        results.append(events)
    assert results[0] == results[1] and [(e["time"], e["event"]) for e in results[0]] == [
        (ts(1), "start"), (ts(3), "end")]


def test_a_byte_that_is_not_utf8_rejects_its_row_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = ("time,channel,value\n" + ph_rows(range(0, 3))).encode()
    data = head + f"{ts(3)},ph,7\xff\n".encode("latin-1") + ph_rows(range(4, 6), "4").encode()
    (tmp_path / "readings.csv").write_bytes(data)
    from monitor.cli import main

    (tmp_path / "site.toml").write_text(REPLAY_SITE, encoding="utf-8")
    code = main(["replay", "--config", str(tmp_path / "site.toml"), str(tmp_path / "readings.csv"),
                 "--output", str(tmp_path / "out.jsonl"), "--max-rejected", "100"])
    err = capsys.readouterr().err
    assert code == 0 and "readings.csv:5: skipped (unparseable): value '7\\udcff'" in err, err
    assert "rows read: 6\nrows rejected: 1" in err


def test_after_an_outlier_its_channel_is_judged_at_once_in_file_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The row that shows the outlier up is judged with the rows around it, not held in turn: the episodes
    come out in file order (ties in time are written in the order the engine emitted them)."""
    text = "time,channel,value\n" + f"{ts(0)},lel,1\n{ts(0)},ph,7\n{ts(86400)},ph,7\n"
    text += f"{ts(1)},ph,4\n{ts(1)},lel,6\n{ts(2)},ph,7\n{ts(2)},lel,6\n"
    code, events, err = run_replay(tmp_path, text, capsys, REPLAY_SITE, "--max-rejected", "100")
    assert code == 0 and "rows rejected: 1; implausible time 1" in err
    assert [(e["time"], e["rule"], e["event"]) for e in events] == [
        (ts(1), "ph_low", "start"), (ts(2), "ph_low", "end"), (ts(2), "lel_successive", "start")]


def test_a_dash_reads_the_rows_from_standard_input(tmp_path: Path) -> None:
    """`pretreat readings … | pretreat replay --config F -`: the same episodes as from a file, and a rejected
    row is named by its line in ``<stdin>``."""
    cfg = write_file(tmp_path, "site.toml", REPLAY_SITE)
    text = f"time,channel,value\n{ts(0)},ph,4\n{ts(1)},ph,x\n{ts(2)},ph,7\n"
    done = subprocess.run([sys.executable, "-m", "monitor.cli", "replay", "--config", str(cfg), "-",
                           "--max-rejected", "100"], input=text, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2], check=False)
    assert done.returncode == 0, done.stderr
    events = [json.loads(x) for x in done.stdout.splitlines()]
    assert [(e["time"], e["event"]) for e in events] == [(ts(0), "start"), (ts(2), "end")]
    assert "<stdin>:3: skipped (unparseable)" in done.stderr, done.stderr
