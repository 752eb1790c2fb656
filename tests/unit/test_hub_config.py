"""The hub's own file (`monitor.hub.config`), Sparkplug topic parsing and the seq-gap arithmetic of the edges'
health: pure functions, no servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.hub.config import HubConfig, HubConfigError, load_hub_config
from monitor.hub.edges import missing_positions
from monitor.hub.store import event_row
from monitor.uplink.contract import Topic, TopicError, device_topic, events_topic, node_topic, parse_topic

GOOD = """
[broker]
host = "broker.county.example"
[hub]
client_id = "hub-a"
health_file = "state/hub-a.json"
[database]
url = "postgresql://pretreat@db/pretreat"
"""


def test_a_minimal_file_gets_the_defaults(tmp_path: Path) -> None:
    f = tmp_path / "hub.toml"
    f.write_text(GOOD)
    cfg = load_hub_config(f)
    assert (cfg.broker_port, cfg.group, cfg.sparkplug_group, cfg.edge_silence) == (1883, "pretreat-hubs", "pretreat",
                                                                                   60.0)
    assert cfg.health_file == tmp_path / "state" / "hub-a.json"
    assert cfg.subscriptions == ("$share/pretreat-hubs/spBv1.0/pretreat/#",
                                 "$share/pretreat-hubs/pretreat/v1/pretreat/+/events")


def test_every_mistake_is_listed_with_its_key(tmp_path: Path) -> None:
    f = tmp_path / "hub.toml"
    f.write_text("""
[broker]
port = 70000
colour = "blue"
[hub]
group = "a/b"
edge_silence = "long"
[database]
url = "mysql://x"
[extra]
""")
    with pytest.raises(HubConfigError) as err:
        load_hub_config(f)
    text = str(err.value)
    for expected in ("[broker] port: 70000 is not a TCP port", "[broker] colour: unknown key",
                     "[hub] client_id: missing", "[hub] group: 'a/b' must be letters",
                     "[hub] edge_silence: expected float", "[database] url: 'mysql://x' is not a postgresql:// URL",
                     "[extra]: unknown section"):
        assert expected in text, text
    assert "7 error(s)" in text


def test_an_unreadable_or_broken_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(HubConfigError, match="cannot read"):
        load_hub_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[hub\n")
    with pytest.raises(HubConfigError, match=r"bad\.toml: not valid TOML"):
        load_hub_config(tmp_path / "bad.toml")


def test_topics_of_the_contract() -> None:
    """The hub parses exactly what the edge's topic builders make (one module holds both)."""
    assert parse_topic("spBv1.0/pretreat/DDATA/e1/acme", "pretreat") == Topic("DDATA", "e1", "acme")
    assert parse_topic(device_topic("county", "DBIRTH", "e-1", "acme_2"), "county") == Topic("DBIRTH", "e-1", "acme_2")
    assert parse_topic(node_topic("county", "NDEATH", "e1"), "county") == Topic("NDEATH", "e1")
    assert parse_topic(events_topic("pretreat", "e1"), "pretreat") == Topic("events", "e1")
    for wrong in ("spBv1.0/other/DDATA/e1/acme", "pretreat/v1/pretreat/e1/other", "spBv1.0/pretreat",
                  "spBv1.0/pretreat/DDATA//acme", "pretreat/v1/other/e1/events"):
        with pytest.raises(TopicError, match="not in the uplink namespace"):
            parse_topic(wrong, "pretreat")
    assert HubConfig("h", 1883, "hub-a", "hubs", "county", "postgresql://x", Path("h.json")).subscriptions == (
        "$share/hubs/spBv1.0/county/#", "$share/hubs/pretreat/v1/county/+/events")


@pytest.mark.parametrize(("seqs", "missing"), [
    ([], 0),
    ([0, 1, 2, 3], 0),
    ([254, 255, 0, 1], 0),          # the wrap from 255 to 0 is no gap
    ([0, 2, 1, 3], 0),              # out of order within a millisecond
    ([0, 1, 3, 4], 1),
    ([250, 251, 2, 3], 6),          # 252..255, 0, 1 missing across the wrap
    (list(range(256)) * 2, 0),      # two full laps
])
def test_missing_positions(seqs: list[int], missing: int) -> None:
    assert missing_positions(seqs) == missing


def test_event_rows_need_a_type_and_an_integer_seq() -> None:
    assert event_row("e1", b'{"type": "seal", "seq": 4, "site": "acme"}', "t")[:4] == ("e1", "seal", 4, "acme")
    for raw, why in ((b"[]", "expected a JSON object"), (b'{"type": "seal", "seq": "4"}', "must be an integer"),
                     (b'{"type": "x", "seq": 1}', "must be one of episode, revision, alarm, seal"),
                     (b"\xff", "not JSON")):
        with pytest.raises(ValueError, match=why):
            event_row("e1", raw, "t")
