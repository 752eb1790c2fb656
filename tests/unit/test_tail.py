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

T = datetime(2026, 12, 3, 5, 17, 18, 250000, tzinfo=UTC).timestamp()  # 00:17:18 EST
SITE = """
[daemon]
historian = "pretreat.sqlite"

[[site]]
id = "acme"
timezone = "America/New_York"

[[site.instrument]]
id = "flow-meter"
driver = "modbus_tcp"
host = "127.0.0.1"
port = 15020
register_map = "flow_meter"

[[site.instrument]]
id = "lel-meter"
driver = "mqtt"
host = "127.0.0.1"
port = 1883

[[site.channel]]
id = "flow"
instrument = "flow-meter"
point = "flow_rate"
kind = "flow"
unit = "gpm"
resolution = 0.1

[[site.channel]]
id = "lel"
instrument = "lel-meter"
kind = "lel"
unit = "%LEL"
topic = "acme/lel"
payload = "number"
"""


async def test_readings_in_the_sites_time_and_resolution_and_in_utc_on_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.toml"
    site.write_text(SITE)
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
