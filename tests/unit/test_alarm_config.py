"""Alarm configuration: [notify] channels, [[site.route]] routing, [site.alarm] settings, every mistake named."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from alarms.model import AlarmSettings, Kind, Priority
from config.alarms import DEFAULT_ALARMS, DEFAULT_KINDS, AlarmConfig, alarm_specs, parse_alarms
from config.loader import check_config, load_config
from config.notify import EmailNotify, MqttNotify, NotifierKind, WebhookNotify, default_state_dir
from config.reader import Reader

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "examples" / "alarms.toml"
DEMO = REPO / "config" / "sites" / "demo.toml"

CHANNELS = """
[notify]
[[notify.channel]]
id = "smtp"
kind = "email"
host = "smtp.example.org"
from = "Alarms <alarms@example.org>"
[[notify.channel]]
id = "hook"
kind = "webhook"
url = "http://127.0.0.1:9/x"
[[notify.channel]]
id = "scada"
kind = "mqtt"
"""


def parse(text: str, base: Path, **kw: object) -> tuple[AlarmConfig | None, list[str]]:
    reader = Reader("site.toml")
    cfg = parse_alarms(tomllib.loads(text), reader, base, **kw)  # type: ignore[arg-type]
    return cfg, [f"{e.path}: {e.expected}" for e in reader.errors]


def errors_of(text: str, base: Path) -> list[str]:
    return parse(text, base)[1]


def test_no_tables_means_no_alarm_config(tmp_path: Path) -> None:
    assert parse('[daemon]\n[[site]]\nid = "a"\ntimezone = "UTC"\n', tmp_path) == (None, [])


INSERT = ("""awk 'NR == FNR { f = f $0 "\\n"; next } /^\\[\\[site\\]\\]$/ && ++n == 2 { printf "%s\\n", f } 1' """
          "config/examples/alarms.toml config/sites/demo.toml")


def with_example(tmp_path: Path) -> Path:
    """The demo site with the example inserted by the command its first lines give, written at the same depth as
    config/sites/ so that the demo's relative paths stay inside ``tmp_path``."""
    site = tmp_path / "config" / "sites" / "site.toml"
    site.parent.mkdir(parents=True)
    made = subprocess.run(INSERT, shell=True, cwd=REPO, capture_output=True, text=True, check=True)
    site.write_text(made.stdout)
    return site


def test_the_example_says_it_is_a_fragment_and_inserted_as_it_says_the_demo_site_validates(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    assert "fragment" in text.splitlines()[0]
    assert f"#   {INSERT} > config/sites/demo-alarms.toml" in text
    site = with_example(tmp_path)
    assert check_config(site) == []
    config = load_config(site)
    assert config.alarms is not None
    assert {r.name for r in config.alarms.routes("acme-plating")} == {
        "industry", "industry-system", "plant-operator", "superintendent"}


def test_the_shipped_example_notifies_the_industry_and_the_plant_operator(tmp_path: Path) -> None:
    """Pawling item (4): 'notify the industry and the operator of the sewage treatment plant'."""
    site = with_example(tmp_path)
    sites = load_config(site).sites
    cfg, errors = parse(site.read_text(), site.parent, sites=sites)
    assert errors == []
    assert cfg is not None and cfg.notify is not None
    assert [c.id for c in cfg.notify.channels] == ["plant-scada", "daemon-log", "smtp", "acme-webhook"]
    routes = {r.name: r for r in cfg.routes("acme-plating")}
    assert routes["industry"].recipients == ("ehs-manager@acme-plating.example",)
    assert routes["industry"].min_priority is Priority.HIGH
    assert routes["plant-operator"].recipients == ("operator@pawling-wwtp.example",)
    assert routes["plant-operator"].min_priority is Priority.LOW
    assert routes["superintendent"].level == 2
    assert (routes["industry"].audience, routes["plant-operator"].audience) == ("industry", "plant_operator")
    assert cfg.notify.state_dir == site.parent / "../../var/demo/notify"
    scada = cfg.notify.channel("plant-scada")
    assert scada.every_transition and isinstance(scada.settings, MqttNotify)
    assert scada.settings.topic_prefix == "pretreat/demo"
    # settings over the defaults: lel_single keeps critical + latched and gains its reminder and escalation
    lel = cfg.settings("acme-plating", "lel", "lel_single")
    assert lel == AlarmSettings(priority=Priority.CRITICAL, latched=True, realarm_interval=600,
                                escalate_after=(900.0,))
    assert cfg.settings("acme-plating", "ph", "ph_high").on_delay == 10


def test_alarm_specs_give_every_rule_binding_an_alarm_with_its_settings(tmp_path: Path) -> None:
    site = with_example(tmp_path)
    sites = load_config(site).sites
    cfg, _ = parse(site.read_text(), site.parent, sites=sites)
    specs = {(s, c, r): st for s, c, r, st in alarm_specs(sites, cfg)}
    # one alarm per binding, and a slug judged against a trailing baseline has its "no baseline yet" notice too
    trailing = [(s.id, b.channel) for s in sites for b in s.checks
                if b.rule == "slug" and b.params.get("baseline") is None]
    assert len(specs) == sum(len(s.checks) for s in sites) + len(trailing)
    assert all((site, channel, "slug_no_baseline") in specs for site, channel in trailing)
    assert specs[("acme-plating", "lel", "lel_successive")] == DEFAULT_ALARMS["lel_successive"]
    assert specs[("acme-plating", "ph", "ph_high")].deadband == 0.1
    assert specs[("acme-plating", "flow", "stale")].priority is Priority.LOW
    assert specs[("acme-plating", "flow", "stale")].on_delay == 60
    # without any alarm configuration the documented defaults apply
    defaults = {(s, c, r): st for s, c, r, st in alarm_specs(sites, None)}
    assert defaults[("acme-plating", "lel", "lel_single")] == AlarmSettings(priority=Priority.CRITICAL,
                                                                           latched=True)
    assert defaults[("acme-plating", "ph", "ph_low")] == AlarmSettings(priority=Priority.HIGH)
    assert defaults[("acme-plating", "ph", "sensor_fault")].priority is Priority.LOW


def test_channel_defaults_and_state_dir_beside_the_historian(tmp_path: Path) -> None:
    cfg, errors = parse(CHANNELS, tmp_path, historian=tmp_path / "var" / "pretreat.sqlite")
    assert errors == []
    assert cfg is not None and cfg.notify is not None
    assert cfg.notify.state_dir == default_state_dir(tmp_path / "var" / "pretreat.sqlite") \
        == tmp_path / "var" / "pretreat.notify"
    smtp, hook, scada = cfg.notify.channels
    assert smtp.kind is NotifierKind.EMAIL and not smtp.every_transition
    assert smtp.settings == EmailNotify(host="smtp.example.org", sender="Alarms <alarms@example.org>")
    assert isinstance(hook.settings, WebhookNotify) and hook.settings.timeout == 10.0
    assert scada.every_transition and scada.settings == MqttNotify()
    flood = cfg.notify.flood
    assert (flood.threshold, flood.window, flood.hold, flood.exempt) == (10, 600.0, 60.0,
                                                                         frozenset({Priority.CRITICAL}))


def test_route_defaults_and_filters(tmp_path: Path) -> None:
    cfg, errors = parse(CHANNELS + """
[[site]]
id = "s1"
timezone = "UTC"
[[site.route]]
name = "ops"
notify = "smtp"
to = ["a@example.org", "b@example.org", "a@example.org"]
[[site.route]]
name = "acks"
notify = "hook"
kinds = ["ack", "reset"]
rules = ["ph_high"]
channels = ["ph"]
[[site.route]]
name = "all"
notify = "hook"
kinds = ["all"]
""", tmp_path)
    assert errors == []
    assert cfg is not None
    ops, acks, everything = cfg.routes("s1")
    assert ops.recipients == ("a@example.org", "b@example.org")  # duplicates folded, order kept
    assert (ops.min_priority, ops.kinds, ops.level) == (Priority.LOW, DEFAULT_KINDS, 1)
    assert acks.kinds == {Kind.ACK, Kind.RESET}
    assert acks.matches(priority=Priority.LOW, kind=Kind.ACK, level=1, rule="ph_high", channel="ph")
    assert not acks.matches(priority=Priority.LOW, kind=Kind.ACK, level=1, rule="ph_low", channel="ph")
    assert not acks.matches(priority=Priority.LOW, kind=Kind.RAISE, level=1, rule="ph_high", channel="ph")
    assert everything.kinds == frozenset(Kind)
    assert cfg.routes("other-site") == ()


def test_every_mistake_is_named_with_its_key_path(tmp_path: Path) -> None:
    errors = errors_of(CHANNELS + """
[[notify.channel]]
id = "smtp"
kind = "log"
[[notify.channel]]
id = "x"
kind = "pager"
[[notify.channel]]
id = "bad-mail"
kind = "email"
host = "h"
from = "nobody"
password_file = "missing.txt"
port = 0
[[site]]
id = "s1"
timezone = "UTC"
[[site.route]]
name = "r1"
notify = "nowhere"
[[site.route]]
name = "r1"
notify = "smtp"
[[site.route]]
name = "r3"
notify = "smtp"
to = ["not-an-address"]
min_priority = "urgent"
kinds = ["raise", "explode"]
level = 0
[[site.route]]
name = "r4"
notify = "hook"
to = ["a@example.org"]
rules = ["ph_hihg"]
colour = "red"
[[site.route]]
name = "r5"
notify = "scada"
[site.alarm.ph_high]
priority = "loud"
latched = "yes"
on_delay = -1
escalate_after = [600, 300]
[site.alarm.no_such_rule]
priority = "low"
[site.alarm.ph_low]
delay = 5
""", tmp_path)
    expected = [
        "notify.channel[3].id: a channel id not already used",
        "notify.channel[4].kind: one of ['mqtt', 'email', 'webhook', 'log']",
        "notify.channel[5].password_file: a readable file",
        "notify.channel[5].password_file: a username too",
        "notify.channel[5].from: a From: address, e.g. 'Alarms <alarms@example.org>'",
        "notify.channel[5].port: an integer >= 1 and <= 65535",
        "site[0].route[0].notify: the id of a [[notify.channel]]: ['bad-mail', 'hook', 'scada', 'smtp']",
        "site[0].route[1].to: at least one e-mail address",
        "site[0].route[1].name: a route name not already used in this site",
        "site[0].route[2].to: an e-mail address like name@example.org",
        "site[0].route[2].level: an integer >= 1 and <= 10",
        "site[0].route[2].min_priority: one of ['critical', 'high', 'medium', 'low', 'diagnostic']",
        "site[0].route[2].kinds: \"all\" or transition kinds from " + str([k.value for k in Kind]),
        "site[0].route[3].colour: one of the known keys " + str(sorted(
            {"name", "notify", "to", "min_priority", "kinds", "level", "rules", "channels", "description",
             "audience"})),
        "site[0].route[3].to: no recipients: a webhook channel is the recipient itself",
        "site[0].route[3].rules: a rule name, one of ",
        "site[0].route[4].notify: a channel without every_transition (this one already gets every transition "
        "of every site)",
        "site[0].alarm.ph_high.priority: one of ['critical', 'high', 'medium', 'low', 'diagnostic']",
        "site[0].alarm.ph_high.latched: true or false",
        "site[0].alarm.ph_high.on_delay: a number >= 0",
        "site[0].alarm.ph_high.escalate_after: seconds (> 0) unacknowledged before escalating, or a strictly "
        "increasing list",
        "site[0].alarm.no_such_rule: a rule name, one of ",
        "site[0].alarm.ph_low.delay: one of the known keys ",
    ]
    for e in expected:
        assert any(err.startswith(e) for err in errors), f"missing error {e!r} in {errors}"
    assert sum("route[2].to" in e for e in errors) == 1  # one bad address, one error


def test_route_channels_are_checked_against_the_site(tmp_path: Path) -> None:
    sites = load_config(DEMO).sites
    _, errors = parse(CHANNELS + """
[[site]]
id = "acme-plating"
timezone = "UTC"
[[site.route]]
name = "ops"
notify = "hook"
channels = ["ph", "flow", "pH"]
[[site.alarm]]
rule = "ph_high"
channel = "ph2"
on_delay = 5
""", tmp_path, sites=sites)
    assert [e.split(":")[0] for e in errors] == ["site[0].route[0].channels", "site[0].alarm[0].channel"]


def test_channel_override_applies_over_the_rules_entry_in_either_order(tmp_path: Path) -> None:
    cfg, errors = parse("""
[[site]]
id = "s1"
timezone = "UTC"
[[site.alarm]]
rule = "lel_single"
channel = "lel2"
latched = false
[[site.alarm]]
rule = "lel_single"
realarm_interval = 300
[[site.alarm]]
rule = "ph_high"
channel = "ph"
escalate_after = 900
""", tmp_path)
    assert errors == []
    assert cfg is not None and cfg.notify is None  # settings without channels: alarms kept, nobody told
    assert cfg.settings("s1", "lel", "lel_single") == AlarmSettings(priority=Priority.CRITICAL, latched=True,
                                                                     realarm_interval=300)
    assert cfg.settings("s1", "lel2", "lel_single") == AlarmSettings(priority=Priority.CRITICAL, latched=False,
                                                                      realarm_interval=300)
    assert cfg.settings("s1", "ph", "ph_high").escalate_after == (900.0,)
    assert cfg.settings("s1", "ph2", "ph_high") == DEFAULT_ALARMS["ph_high"]
    assert cfg.settings("other", "x", "unknown_rule").priority is Priority.HIGH


@pytest.mark.parametrize(("extra", "error"), [
    ("ssl = true\nstarttls = true", "notify.channel[0].starttls: false when ssl = true"),
    ('starttls = false\nusername = "u"', "notify.channel[0].starttls: true (or ssl = true)"),
    ("every_transition = true", "notify.channel[0].every_transition: false for email"),
])
def test_email_security_is_never_silently_weakened(tmp_path: Path, extra: str, error: str) -> None:
    errors = errors_of(f'[notify]\n[[notify.channel]]\nid = "m"\nkind = "email"\nhost = "h"\n'
                       f'from = "a@example.org"\n{extra}\n', tmp_path)
    assert any(e.startswith(error) for e in errors), errors


def test_secret_files_are_checked_not_read(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2\n")
    cfg, errors = parse('[notify]\n[[notify.channel]]\nid = "m"\nkind = "mqtt"\nusername = "u"\n'
                        'password_file = "pw"\n', tmp_path)
    assert errors == []
    assert cfg is not None and cfg.notify is not None
    settings = cfg.notify.channels[0].settings
    assert isinstance(settings, MqttNotify) and settings.password_file == tmp_path / "pw"
    assert "hunter2" not in repr(cfg)
