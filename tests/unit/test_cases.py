"""Golden cases: every folder under tests/cases/ holds site.toml + readings.csv in and expected.jsonl out.

Each case is named after what it guards (a rule, a boundary, a jurisdiction, a month end); its site.toml opens
with a comment saying what the readings do and why the expected episodes follow from the ordinance's words.
Each is run three ways that must all give exactly expected.jsonl: `pretreat replay`'s code path, the daemon's
path (one `Sample` at a time through `CheckEngine.process`), and the engine with its fast path disabled.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.loader import load_config
from monitor.checks.engine import CheckEngine
from monitor.checks.events import parse_iso
from monitor.checks.replay_run import replay
from monitor.sample import Quality, Sample

CASES = Path(__file__).resolve().parents[1] / "cases"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "readings.csv").exists())  # episode cases (report_* differ)
# Refusal cases: a site file the law does not allow as written; refused.txt lists text each error message must hold.
REFUSED = sorted(p.name for p in CASES.iterdir() if (p / "refused.txt").exists())


def _expected(case: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (case / "expected.jsonl").read_text(encoding="utf-8").splitlines()]


def _samples(case: Path, site: str) -> list[Sample]:
    out = []
    with (case / "readings.csv").open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            t = parse_iso(row["time"])
            quality = row.get("quality") or "good"
            if quality == "good":
                out.append(
                    Sample(time=t, site=site, channel=row["channel"], value=float(row["value"]), unit="")
                )
            elif quality == "over_range":  # recorded with the instrument's number, as a driver makes it
                out.append(Sample(time=t, site=site, channel=row["channel"], value=float(row["value"]), unit="",
                                  quality=Quality.OVER_RANGE, reason="above the span"))
            else:
                out.append(
                    Sample.bad(
                        time=t,
                        site=site,
                        channel=row["channel"],
                        unit="",
                        quality=Quality(quality),
                        reason=quality,
                    )
                )
    return out


def test_cases_exist() -> None:
    assert len(NAMES) >= 15


@pytest.mark.parametrize("name", NAMES)
def test_replay_gives_the_expected_episodes(name: str) -> None:
    case = CASES / name
    config = load_config(case / "site.toml")
    out, err = io.StringIO(), io.StringIO()
    with (case / "readings.csv").open(newline="", encoding="utf-8") as src:
        stats = replay(config, src, out, source=name, err=err)
    assert stats.rejected.total == 0, err.getvalue()
    assert [json.loads(x) for x in out.getvalue().splitlines()] == _expected(case)


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_live_path_gives_the_same_episodes(name: str, fast: bool) -> None:
    case = CASES / name
    config = load_config(case / "site.toml")
    engine = CheckEngine.for_config(config, fast=fast)
    events = engine.process_many(_samples(case, config.sites[0].id))
    got = sorted((e.to_dict() for e in events), key=lambda d: str(d["time"]))  # stable, as replay sorts
    assert got == _expected(case)


def test_every_case_folder_is_run() -> None:
    """A folder that is neither an episode case nor a report case would be silently left out."""
    others = [p.name for p in CASES.iterdir() if p.is_dir() and p.name not in NAMES and p.name not in REFUSED
              and not p.name.startswith("report_") and not p.name.startswith("__")]
    assert others == []
    assert len(NAMES) >= 18


def test_refusal_cases_exist() -> None:
    assert len(REFUSED) >= 4


@pytest.mark.parametrize("name", REFUSED)
def test_refused_site_files_name_what_the_law_requires(name: str) -> None:
    case = CASES / name
    with pytest.raises(ConfigErrors) as info:
        load_config(case / "site.toml")
    text = "\n".join(str(e) for e in info.value.errors)
    for needle in (case / "refused.txt").read_text(encoding="utf-8").splitlines():
        if needle.strip():
            assert needle in text, text
