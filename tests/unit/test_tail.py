"""`pretreat tail` speaks as the daemon's log beside it on the demo's screen: the site's time of day with its
zone, values at the channel's resolution; ``--utc`` gives UTC to the millisecond."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.loader import load_config
from monitor.sample import Quality, Sample
from monitor.stores.historian import Historian
from monitor.tail import Line, _show_new
from tests.unit.test_status import SITE

T = datetime(2026, 12, 3, 5, 17, 18, 250000, tzinfo=UTC).timestamp()  # 00:17:18 EST


async def test_readings_in_the_sites_time_and_resolution_and_in_utc_on_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.toml"
    site.write_text(SITE.format(port=15020).replace('timezone = "UTC"', 'timezone = "America/New_York"')
                    .replace('unit = "gpm"\n', 'unit = "gpm"\nresolution = 0.1\n'))
    config = load_config(site)
    h = Historian(path=config.daemon.historian, commit_interval=0.05)
    await h.start()
    h.submit([Sample(T, "acme", "flow", 378.326, "gpm"), Sample(T, "acme", "lel", 0.473412, "%LEL"),
              Sample.bad(time=T + 1, site="acme", channel="flow", unit="gpm", quality=Quality.COMM_FAILURE,
                         reason="no reply from unit 1")])
    await h.close()

    _show_new(config.daemon.historian, {("acme", "flow"): 0.0, ("acme", "lel"): 0.0}, {}, 0.0,
              Line(config, utc=False))
    lines = capsys.readouterr().out.splitlines()
    assert "00:17:18 EST  acme/flow" in lines[0] and lines[0].endswith("     378.3 gpm")
    assert "00:17:18 EST  acme/lel" in lines[1] and lines[1].endswith("    0.4734 %LEL")
    assert "00:17:19 EST  acme/flow" in lines[2] and lines[2].endswith("COMM_FAILURE: no reply from unit 1")

    _show_new(config.daemon.historian, {("acme", "flow"): 0.0}, {}, 0.0, Line(config, utc=True))
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("05:17:18.250Z  acme/flow") and first.endswith("378.3 gpm")
