"""`pretreat influx backfill`: the historian's readings, re-sent to a real VictoriaMetrics, exactly and
idempotently."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.influx import InfluxSettings
from monitor import influx_cli
from monitor.influx_cli import BackfillError, backfill, time_arg
from monitor.sample import Quality, Sample
from monitor.stores.historian import Historian
from monitor.stores.influx import InfluxSink
from monitor.stores.influx_lines import SampleFormatter
from tests.support import VictoriaMetrics

INSTRUMENTS = {("acme", "ph"): ("ph-meter", "ph"), ("acme", "flow"): ("flow-meter", "flow"),
               ("beta", "ph"): ("ph-2", "ph")}
BASE = 1_764_460_800.0  # 2025-11-30T00:00:00Z


def samples() -> list[Sample]:
    out = []
    for i in range(600):
        t = BASE + i * 1.5 + 0.0004 * (i % 7)  # sub-millisecond parts: rounding must be the same both ways
        if i % 40 == 7:
            out.append(Sample.bad(time=t, site="acme", channel="ph", unit="pH", quality=Quality.STALE,
                                  reason="no reading for 3 polls"))
        else:
            out.append(Sample(time=t, site="acme", channel="ph", value=round(7 + (i % 50) / 100, 2),
                              unit="pH"))
        out.append(Sample(time=t, site="acme", channel="flow", value=120.0 + i, unit="gpm"))
        out.append(Sample(time=t, site="beta", channel="ph", value=8.0, unit="pH"))
    return out


@pytest.fixture
async def historian(tmp_path: Path) -> Path:
    path = tmp_path / "pretreat.sqlite"
    h = Historian(path=path, commit_interval=0.01)
    await h.start()
    h.submit(samples())
    await h.close()
    return path


@pytest.fixture
def dedup_vm(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    """Overwrite on the same series+timestamp, as InfluxDB does (else VictoriaMetrics keeps duplicates)."""
    vm = VictoriaMetrics(tmp_path, extra_args=("-dedup.minScrapeInterval=1ms",))
    vm.start()
    try:
        yield vm
    finally:
        vm.stop()


def settings(vm: VictoriaMetrics, tmp_path: Path) -> InfluxSettings:
    return InfluxSettings(url=vm.url, bucket="pretreat", queue_path=tmp_path / "queue.sqlite", batch_size=250,
                          flush_interval=0.05, max_backoff=0.2, timeout=2.0)


def ms(t: float) -> int:
    return round(t * 1000)


def export(vm: VictoriaMetrics, count: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    series = vm.wait_for_points('{__name__=~"(ph|flow)_(value|quality|reason)"}', count)
    return {(s["metric"]["__name__"], s["metric"]["site"], s["metric"]["channel"]): s for s in series}


async def test_backfill_matches_the_historian_exactly(victoria: VictoriaMetrics, historian: Path,
                                                      tmp_path: Path) -> None:
    start, end = BASE + 150, BASE + 750  # a window inside the recording: [start, end)
    report = backfill(settings=settings(victoria, tmp_path), instruments=INSTRUMENTS, historian=historian,
                      start=start, end=end, site="acme")
    recorded = {ch: list(Historian.read(path=historian, site="acme", channel=ch, start=start, end=end))
                for ch in ("ph", "flow")}
    assert report.points == sum(len(v) for v in recorded.values()) == 800
    assert report.channels == 2 and report.quarantined == []
    got = export(victoria, 2 * 800)
    assert {k[1] for k in got} == {"acme"}  # --site honoured
    ph_good = [s for s in recorded["ph"] if s.good]
    ph_bad = [s for s in recorded["ph"] if not s.good]
    assert ph_bad, "the window must contain bad readings"
    assert got[("ph_value", "acme", "ph")]["timestamps"] == [ms(s.time) for s in ph_good]
    assert got[("ph_value", "acme", "ph")]["values"] == [s.value for s in ph_good]
    assert got[("ph_quality", "acme", "ph")]["timestamps"] == [ms(s.time) for s in recorded["ph"]]
    assert got[("ph_reason", "acme", "ph")]["timestamps"] == [ms(s.time) for s in ph_bad]
    assert got[("flow_value", "acme", "flow")]["values"] == [s.value for s in recorded["flow"]]
    assert got[("flow_value", "acme", "flow")]["timestamps"] == [ms(s.time) for s in recorded["flow"]]
    assert min(got[("flow_value", "acme", "flow")]["timestamps"]) >= ms(start)
    assert max(got[("flow_value", "acme", "flow")]["timestamps"]) < ms(end)


async def test_backfill_over_live_data_and_twice_overwrites_not_duplicates(dedup_vm: VictoriaMetrics,
                                                                            historian: Path,
                                                                            tmp_path: Path) -> None:
    live = InfluxSink(settings=settings(dedup_vm, tmp_path), instruments=INSTRUMENTS, health_interval=None)
    await live.start()
    live.submit(samples())
    assert await live.wait_drained(20)
    await live.close()
    before = export(dedup_vm, 2 * 1800)
    for _ in range(2):
        backfill(settings=settings(dedup_vm, tmp_path), instruments=INSTRUMENTS, historian=historian,
                 start=BASE, end=BASE + 10_000)
    after = export(dedup_vm, 2 * 1800)
    assert after == before
    assert len(after[("flow_value", "acme", "flow")]["timestamps"]) == 600


async def test_backfill_lines_are_byte_identical_to_live_lines(historian: Path) -> None:
    # the reason overwriting works: same measurement, tags, fields and millisecond timestamp
    live = SampleFormatter(instruments=INSTRUMENTS).lines(s for s in samples() if s.channel == "ph"
                                                          and s.site == "acme")
    replay = SampleFormatter(instruments=INSTRUMENTS).lines(Historian.read(path=historian, site="acme",
                                                                           channel="ph"))
    assert replay == live


async def test_unknown_channel_lists_the_known_ones(victoria: VictoriaMetrics, historian: Path,
                                                    tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no channel 'ph2'.*known: \['flow', 'ph'\]"):
        backfill(settings=settings(victoria, tmp_path), instruments=INSTRUMENTS, historian=historian,
                 start=BASE, end=BASE + 10, site="acme", channels=["ph2"])
    with pytest.raises(ValueError, match=r"no site 'gamma'.*\['acme', 'beta'\]"):
        backfill(settings=settings(victoria, tmp_path), instruments=INSTRUMENTS, historian=historian,
                 start=BASE, end=BASE + 10, site="gamma")


async def test_server_down_gives_up_with_a_clear_error(historian: Path, tmp_path: Path) -> None:
    vm = VictoriaMetrics(tmp_path)  # never started
    began = time.monotonic()
    with pytest.raises(BackfillError, match=r"unavailable for 0.5 s.*Re-run when it is back"):
        backfill(settings=settings(vm, tmp_path), instruments=INSTRUMENTS, historian=historian,
                 start=BASE, end=BASE + 100, give_up_after=0.5)
    assert time.monotonic() - began < 5


def test_time_arg() -> None:
    assert time_arg("2025-11-30") == BASE
    assert time_arg("2025-11-30T00:00:01Z") == BASE + 1
    assert time_arg("2025-11-29T19:00:00-05:00") == BASE
    with pytest.raises(argparse.ArgumentTypeError, match="has no UTC offset"):
        time_arg("2025-11-30T00:00:00")
    with pytest.raises(argparse.ArgumentTypeError, match="is not a time"):
        time_arg("yesterday")


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    influx_cli.add_arguments(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["backfill", "--config", str(tmp_path / "none.toml"), "--from", "2025-11-30",
                 "--to", "2025-11-29"]) == 2
    assert "--from must be before --to" in capsys.readouterr().err
    assert _cli(["backfill", "--config", str(tmp_path / "none.toml"), "--from", "2025-11-29",
                 "--to", "2025-11-30"]) == 2
    assert "existing TOML file" in capsys.readouterr().err


async def test_cli_end_to_end(victoria: VictoriaMetrics, historian: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.toml"
    site.write_text(f"""
[daemon]
historian = "{historian}"

[influx]
url = "{victoria.url}"
bucket = "pretreat"
queue_path = "queue.sqlite"

[[site]]
id = "acme"
timezone = "UTC"
[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
register_map = "flow_meter"
[[site.channel]]
id = "flow"
instrument = "flow-meter"
point = "flow_rate"
kind = "flow"
unit = "gpm"
""")
    code = await _acli(["backfill", "--config", str(site), "--from", "2025-11-30", "--to", "2025-12-01",
                        "--channel", "flow"])
    assert code == 0, capsys.readouterr().err
    assert "sent 600 points of 1 channels" in capsys.readouterr().out
    got = export(victoria, 2 * 600)
    assert got[("flow_value", "acme", "flow")]["metric"]["instrument"] == "flow-meter"
    assert len(got[("flow_value", "acme", "flow")]["values"]) == 600


async def _acli(argv: list[str]) -> int:
    import asyncio

    return await asyncio.to_thread(_cli, argv)
