"""The slug baseline in force, shown in the console from the running daemon's engine (its health snapshot), in
the words `pretreat rules` prints for the same record; or, where no number can be shown, why."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.schema import SiteConfig
from monitor.checks.slug import NO_BASELINE
from monitor.cli import main
from monitor.read.baselines import HUB, NO_SNAPSHOT, NOT_IN_SNAPSHOT, daemon_snapshot, site_baselines
from monitor.sample import Sample
from monitor.slug_history import batch_words
from tests.unit.checks_helpers import channel, daemon_health, load, record, record_flow_days, site_toml

SLUG = "[site.rules.slug]\nloading = false\n"


def _date(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).date().isoformat()


def _rules_line(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What `pretreat rules --config` prints as the slug baseline today (the one such line of this site file)."""
    assert main(["rules", "--config", str(path)]) == 0
    [line] = [x.strip() for x in capsys.readouterr().out.splitlines() if x.strip().startswith("baseline today: ")]
    return line.removeprefix("baseline today: ")


def test_the_daemon_publishes_the_baseline_its_engine_judges_by_in_the_words_of_pretreat_rules(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two recorded days at 10 and 14 gpm before today: the daemon's engine, rebuilt at its start, judges today
    by 12 gpm (limit 60 gpm), resting on those two days; its snapshot says so, and the console's entry, built
    from the snapshot alone, reads exactly as `pretreat rules` does from its own rebuild of the record."""
    config = load(tmp_path, site_toml(channel("flow"), extra=SLUG))
    now = time.time()
    now -= 600.0 if now % 86400.0 < 600.0 else 0.0  # some readings of today are needed: not just after midnight
    midnight = record_flow_days(config, [10.0, 14.0], now=now)
    snap = daemon_health(config, now=now)
    state = snap["slug_baselines"]["acme/flow"]  # type: ignore[index]
    assert state == {"fixed": False, "day": _date(midnight), "baseline": 12.0, "threshold": 60.0,
                     "rests_on": [_date(midnight - 2 * 86400.0), _date(midnight - 86400.0)]}
    [entry] = site_baselines(config, config.site("acme"), snap, "", now=now)
    assert (entry["channel"], entry["card"], entry["unit"], entry["unavailable"]) == ("flow", "flow", "gpm", None)
    assert entry["citation"] == "Town of Southeast § 112-5A(1)(j)"
    assert entry["reading"].startswith("read as more than five times the baseline of normal operation for longer")
    assert entry["text"] == (f"12 gpm on {_date(midnight)} (fixed at local midnight), the mean of the 24-hour "
                             f"averages of 2 day(s) of normal operation ({_date(midnight - 2 * 86400.0)}, "
                             f"{_date(midnight - 86400.0)}); a slug is above 60 gpm (5 × the baseline) for longer "
                             "than 15 min")
    assert entry["text"] == _rules_line(config.source or tmp_path / "site.toml", capsys)
    slug = next(b for b in config.site("acme").checks if b.rule == "slug")
    assert entry["batch"] == batch_words(slug, config.site("acme"))  # what a trailing baseline means for a batch
    assert "at this site the permit cannot replace the ordinance's average with fixed values" in entry["batch"]


def test_with_no_day_of_normal_operation_the_console_says_why_in_the_notice_s_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only today recorded: no baseline. The snapshot holds none, and the console says why in the words of
    the slug_no_baseline notice, as `pretreat rules` does."""
    config = load(tmp_path, site_toml(channel("flow"), extra=SLUG))
    now = time.time()
    midnight = now - now % 86400.0
    if now - midnight < 600:  # a few readings of today are needed: too close to midnight, use yesterday's end
        now = midnight - 1.0
        midnight -= 86400.0
    _record_today(config, midnight, now)
    snap = daemon_health(config, now=now)
    [entry] = site_baselines(config, config.site("acme"), snap, "", now=now)
    assert entry["state"] == {"fixed": False, "day": _date(midnight), "baseline": None, "threshold": None,
                              "rests_on": []}
    assert entry["text"] == f"none on {_date(midnight)}: {NO_BASELINE}"
    assert entry["text"] == _rules_line(config.source or tmp_path / "site.toml", capsys)


def _record_today(config: SiteConfig, midnight: float, now: float) -> None:
    """Readings every minute from ``midnight`` to ``now`` (none of a whole day: no day of normal operation)."""
    record(config, [Sample(time=midnight + 60.0 * i, site="acme", channel="flow", value=5.0, unit="gpm")
                    for i in range(int((now - midnight) // 60))])


def test_a_fixed_normal_sewage_strength_is_shown_as_stated_not_measured(tmp_path: Path) -> None:
    """Vestal-Endicott's surrogate channel is judged against the fixed normal-sewage strength: the snapshot
    carries it (no day of readings needed) and the console shows it with the threshold."""
    extra = ('[site.permit]\nid = "VE-1"\n[site.permit.slug]\nsurrogates = ["tss"]\ncite = "Permit VE-1, Part II"\n'
             '[site.rules.slug]\nconstituents = { tss = "suspended_solids" }\n')
    config = load(tmp_path, site_toml(channel("tss", "cod", unit="mg/L"), jurisdiction="vestal_endicott",
                                      extra=extra))
    snap = daemon_health(config, now=time.time())
    assert snap["slug_baselines"] == {"acme/tss": {"fixed": True, "day": None, "baseline": 400.0,
                                                   "threshold": 2000.0, "rests_on": []}}
    [entry] = site_baselines(config, config.site("acme"), snap, "", now=time.time())
    assert entry["text"] == ("fixed normal-sewage strength 400 mg/L (ppm read as mg/L), stated, not measured; "
                             "a slug is above 2000 mg/L (5 × it) for longer than 15 min")
    assert entry["batch"] == ""  # a fixed strength: no day's average, nothing said of batches


def test_without_a_snapshot_or_on_the_hub_s_database_the_console_says_so_instead_of_a_number(
        tmp_path: Path) -> None:
    config = load(tmp_path, site_toml(channel("flow"), extra=SLUG))
    site = config.site("acme")
    snap, why = daemon_snapshot(config.daemon.historian)
    assert (snap, why) == (None, NO_SNAPSHOT)  # the daemon never ran with this file
    [entry] = site_baselines(config, site, snap, why, now=time.time())
    assert (entry["text"], entry["state"], entry["unavailable"]) == (None, None, NO_SNAPSHOT)
    snap, why = daemon_snapshot("postgresql://hub@127.0.0.1/county")
    assert (snap, why) == (None, HUB) and "PostgreSQL" in HUB
    [entry] = site_baselines(config, site, snap, why, now=time.time())
    assert (entry["text"], entry["unavailable"]) == (None, HUB)
    # a snapshot of a daemon that publishes no baseline (another site file, an older version), and one that stopped
    old = {"time": time.time() - 3600.0, "state": "stopped"}
    [entry] = site_baselines(config, site, old, "", now=time.time())
    assert entry["unavailable"] == NOT_IN_SNAPSHOT and entry["stale"].startswith("not running: the daemon stopped")


def test_the_snapshot_section_follows_the_engine_at_midnight_and_after_a_late_reading(tmp_path: Path) -> None:
    """The section is rebuilt only when a detector's day or threshold changes, so it must change when they do:
    at the first reading after midnight (a new baseline fixed), and when a late reading rewinds the engine."""
    from monitor.checks.engine import CheckEngine
    from monitor.slug_history import BaselineSection
    from tests.unit.checks_helpers import T0, samples

    config = load(tmp_path, site_toml(channel("flow"), extra=SLUG))
    engine = CheckEngine.for_config(config, live=True)
    section = BaselineSection(engine)
    engine.process_many(samples([(T0 + 60.0 * i, "flow", 10.0, "good") for i in range(1440)]))
    first = section()["acme/flow"]
    assert (first["day"], first["baseline"]) == ("2025-03-03", None)
    assert section() is section()  # unchanged: not rebuilt
    engine.process_many(samples([(T0 + 86400.0, "flow", 10.0, "good")]))  # midnight: the day's average fixed
    assert section()["acme/flow"] == {"fixed": False, "day": "2025-03-04", "baseline": 10.0, "threshold": 50.0,
                                      "rests_on": ["2025-03-03"]}
    # a late reading of the day before (70 gpm, 90 s before midnight) raises that day's average: a rewind
    engine.process_many(samples([(T0 + 86400.0 - 90.0, "flow", 70.0, "good")]))
    assert section()["acme/flow"]["baseline"] == engine_baseline(engine) != 10.0


def engine_baseline(engine) -> float | None:  # type: ignore[no-untyped-def]
    from monitor.checks.slug import detector_of

    [det] = [d for b, r in engine.rules if b.rule == "slug" and (d := detector_of(r)) is not None]
    return det.baseline  # type: ignore[no-any-return]
