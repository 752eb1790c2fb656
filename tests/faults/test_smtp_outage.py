"""The mail server (a real SMTP server with STARTTLS and AUTH) is down while a pH alarm is raised and cleared,
then comes back: the plant operator gets one mail per journaled transition, in order, none twice, and the
daemon's evaluation and recording never waited for the mail server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from alarms.journal import Journal
from config.loader import load_config
from simulators.playback import Hold
from simulators.runner import SiteSimulator
from tests.faults.harness import (
    SITE,
    InProcessDaemon,
    by_channel,
    channel,
    polled_rows,
    recorded,
    site_file,
    tcp_instrument,
)
from tests.notify_servers import SmtpServer
from tests.support import eventually, free_port

ALARM = f"{SITE}/ph/ph_low"


def mail_site(tmp_path: Path, smtp: SmtpServer) -> Path:
    (tmp_path / "smtp.password").write_text(smtp.password)
    top = (f'[notify]\nstate_dir = "notify"\nmax_backoff = 0.5\n\n'
           f'[[notify.channel]]\nid = "smtp"\nkind = "email"\nhost = "127.0.0.1"\nport = {smtp.port}\n'
           f'starttls = true\nusername = "{smtp.user}"\npassword_file = "smtp.password"\nca_file = "{smtp.cert}"\n'
           'from = "Pretreatment alarms <alarms@example.org>"\n')
    route = ('[[site.route]]\nname = "plant-operator"\nnotify = "smtp"\nto = ["operator@plant.example"]\n'
             'min_priority = "low"\nrules = ["ph_low"]\n')
    instruments = [tcp_instrument("ph-meter", port=free_port(), rmap="ph_meter", poll=0.5, timeout=0.3)]
    channels = [channel("ph", instrument="ph-meter", kind="ph", unit="pH", point="ph", scale=0.01, valid_min=0,
                        valid_max=14)]
    return site_file(tmp_path, instruments=instruments, channels=channels, top=top, site_extra=route)


@pytest.mark.slow  # ~5 s; the notifier's retry tests (tests/integration/test_notify_email.py) run by default
async def test_mail_server_down_then_back_every_alarm_mail_arrives_once(tmp_path: Path,
                                                                       smtp_server: SmtpServer) -> None:
    config = load_config(mail_site(tmp_path, smtp_server))
    journal = Journal(path=config.daemon.historian)
    async with SiteSimulator(config=config) as sim, InProcessDaemon(config) as daemon:
        overrides = sim.playback.overrides.setdefault(SITE, {})
        await asyncio.sleep(1.0)
        smtp_server.stop()
        overrides["ph"] = Hold(4.3)
        assert await eventually(lambda: daemon.alarming.engine.state(ALARM).active)
        overrides.pop("ph")
        assert await eventually(lambda: not daemon.alarming.engine.state(ALARM).condition)
        await asyncio.sleep(1.0)
        assert smtp_server.messages == []
        delivery = daemon.alarming.health()["delivery"]["smtp"]
        assert delivery["depth"] == 2 and not delivery["up"] and delivery["failures"] > 0, delivery
        polls_while_down = daemon.stats[f"{SITE}/ph-meter"].polls
        smtp_server.start()
        assert await eventually(lambda: len(smtp_server.messages) >= 2, 30), delivery
        await asyncio.sleep(1.5)  # time for a duplicate, if one were coming
    transitions = [r for r in journal.records(kinds=["transition"]) if r.payload["alarm"] == ALARM]
    assert journal.verify().ok
    journal.close()
    assert [r.payload["kind"] for r in transitions] == ["raise", "clear"]
    mails = smtp_server.messages
    assert [m["X-Pretreat-Seq"] for m in mails] == [str(r.seq) for r in transitions]  # once each, in order
    assert all(m["To"] == "operator@plant.example" for m in mails)
    assert "ALARM" in mails[0]["Subject"] and "4.3" in mails[0].get_content()
    assert polls_while_down >= 4  # evaluation and polling went on while the mail server was down
    rows = by_channel(recorded(config.daemon.historian))
    assert len(polled_rows(rows["ph"])) == daemon.stats[f"{SITE}/ph-meter"].polls
