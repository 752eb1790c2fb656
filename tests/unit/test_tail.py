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
from tests.faults.harness import SITE, channel, mqtt_instrument, site_file, tcp_instrument

T = datetime(2026, 12, 3, 5, 17, 18, 250000, tzinfo=UTC).timestamp()  # 00:17:18 EST


async def test_readings_in_the_sites_time_and_resolution_and_in_utc_on_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = site_file(tmp_path, instruments=[tcp_instrument("flow-meter", port=15020),
                                            mqtt_instrument("lel-meter", port=1883)],
                     channels=[channel("flow", instrument="flow-meter", kind="flow", unit="gpm", point="flow_rate"),
                               channel("lel", instrument="lel-meter", kind="lel", unit="%LEL", topic="p/lel",
                                       field="lel_pct")])
    site.write_text(site.read_text().replace('unit = "gpm"', 'unit = "gpm"\nresolution = 0.1'))  # site time: New York
    config = load_config(site)
    h = Historian(path=config.daemon.historian, commit_interval=0.05)
    await h.start()
    h.submit([Sample(T, SITE, "flow", 378.326, "gpm"), Sample(T, SITE, "lel", 0.473412, "%LEL"),
              Sample.bad(time=T + 1, site=SITE, channel="flow", unit="gpm", quality=Quality.COMM_FAILURE,
                         reason="no reply from unit 1")])
    await h.close()

    _show_new(config.daemon.historian, {(SITE, "flow"): 0.0, (SITE, "lel"): 0.0}, {}, 0.0,
              Line(config, utc=False))
    lines = capsys.readouterr().out.splitlines()
    assert "00:17:18 EST  plant/flow" in lines[0] and lines[0].endswith("     378.3 gpm")
    assert "00:17:18 EST  plant/lel" in lines[1] and lines[1].endswith("    0.4734 %LEL")
    assert "00:17:19 EST  plant/flow" in lines[2] and lines[2].endswith("COMM_FAILURE: no reply from unit 1")

    _show_new(config.daemon.historian, {(SITE, "flow"): 0.0}, {}, 0.0, Line(config, utc=True))
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("05:17:18.250Z  plant/flow") and first.endswith("378.3 gpm")
