"""The console's alarm list over HTTP (uvicorn on a free port, the daemon played by `tests.browser.harness.Plant`
with the real stores and alarm engine): unacknowledged first, then priority, then time; the peak of a
latched critical LEL alarm and when it was reached, the limit with its unit, the onset and citation; rule
labels, site names, and every time in the site's zone (EST/EDT) rather than epoch seconds."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.alarm_scene import ACME_HIGH, FAULT, LEL, SUCCESSIVE, local, stage, wait
from tests.browser.harness import (
    ACME,
    BOLT,
    BOLT_PH_HIGH,
    Plant,
    console,
    csrf,
    history,
    load,
    login,
    write_site,
    write_users,
)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`stage`, then the operator acknowledges BOLT's pH high."""
    folder = tmp_path_factory.mktemp("console-alarm-list")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    with Plant(config) as plant:
        plant.feed(sorted(history(config, ACME, hours=1) + history(config, BOLT, hours=1), key=lambda s: s.time))
        times = stage(plant, config)
        with console(config, users) as (base, _app):
            op = login(base, "op")
            r = op.post(f"/api/alarms/{BOLT_PH_HIGH}/ack", json={"note": ""}, headers={"X-CSRF-Token": csrf(op)})
            assert r.status_code == 200, r.text
            wait(lambda: any(a["alarm"] == BOLT_PH_HIGH and a["state"] == "active-acknowledged"
                             for a in op.get("/api/alarms").json()))
            yield {"op": op, "times": times, "plant": plant}
            op.close()


def test_unacknowledged_first_then_priority_then_time(env: dict[str, Any]) -> None:
    rows = env["op"].get("/api/alarms?include_normal=false").json()
    order = [(r["alarm"], r["state"], r["priority"]) for r in rows]
    # the two LEL alarms (12 % and 14 %: two successive readings above 5 % too) are older than the LOW fault
    # and the HIGH pH, latched rather than active, and still first
    assert set(order[:2]) == {(LEL, "latched-unacknowledged", "critical"),
                              (SUCCESSIVE, "latched-unacknowledged", "critical")}
    assert order[2:] == [
        (ACME_HIGH, "active-unacknowledged", "high"),
        (FAULT, "active-unacknowledged", "low"),
        (BOLT_PH_HIGH, "active-acknowledged", "high"),  # acknowledged: below every unacknowledged alarm
    ]
    assert rows[0]["since"] >= rows[1]["since"]  # within a priority: newest first
    assert [r["symbol"] for r in rows] == ["◆1", "◆1", "▲2", "●4", "▲2"]
    assert [r["group"] for r in rows] == [0, 0, 0, 0, 1]
    # what the header counts, from the live follower (which catches up with the file within its poll)
    wait(lambda: [(s["alarm"], s["state"], s["priority"]) for s in env["op"].get("/api/alarm-summary").json()] == order)


def test_latched_alarm_shows_peak_limit_onset_and_citation(env: dict[str, Any]) -> None:
    t = env["times"]
    row = next(r for r in env["op"].get("/api/alarms").json() if r["alarm"] == LEL)
    assert (row["value"], row["limit"], row["peak"]) == (1.095, 10.0, 14.0)
    assert (row["value_text"], row["limit_text"], row["peak_text"]) == ("1.095 %LEL", "10 %LEL", "14 %LEL")
    assert row["peak_time"] == pytest.approx(t["peak"], abs=1e-3)
    assert row["peak_time_text"] == local(t["peak"]) and row["peak_time_text"][-3:] in ("EST", "EDT")
    assert row["onset"] == pytest.approx(t["onset"], abs=1e-3) and row["onset_text"] == local(t["onset"])
    assert row["end"] == pytest.approx(t["back"], abs=1e-3)
    assert row["rule_label"] == "Explosive vapour (single)" and row["site_name"] == "ACME Plating Co. — MH-1"
    assert row["state_label"] == "Latched, unacknowledged" and row["timezone"] == "America/New_York"
    assert "§" in row["citation"]


def test_an_active_alarm_peaks_at_its_highest_and_a_data_quality_alarm_has_no_peak(env: dict[str, Any]) -> None:
    rows = {r["alarm"]: r for r in env["op"].get("/api/alarms").json()}
    assert rows[ACME_HIGH]["peak"] == 9.5 and rows[ACME_HIGH]["peak_text"] == "9.5 pH"
    assert rows[FAULT]["peak"] is None and rows[FAULT]["peak_text"] == ""
    assert rows[f"{ACME}/ph/ph_low"]["state"] == "normal" and rows[f"{ACME}/ph/ph_low"]["peak"] is None


def test_journal_explanations_are_local_times_not_epoch_seconds(env: dict[str, Any]) -> None:
    raises = [j for j in env["op"].get("/api/journal?limit=200").json() if j.get("kind") == "raise"]
    lel = next(j for j in raises if j["alarm"] == LEL)
    assert re.search(r"\b1\d{9}\.\d+", lel["why"])  # as journaled
    # journaled to the millisecond ("… at 1764590418.9996" is written 1764590419.000): the second shown is that one's
    assert lel["why_text"] == f"condition started at {local(round(env['times']['onset'], 3))}"
    assert lel["time_text"].endswith(("EST", "EDT"))
    assert not any(re.search(r"\b1\d{9}(\.\d+)?\b", j.get("why_text", "")) for j in raises)


def test_the_peak_of_an_ongoing_episode_follows_new_readings(env: dict[str, Any]) -> None:
    def row() -> Any:
        return next(r for r in env["op"].get("/api/alarms").json() if r["alarm"] == ACME_HIGH)

    assert row()["peak"] == 9.5
    t = time.time()
    env["plant"].value(ACME, "ph", 9.7, t=t)  # after a gap longer than max_gap: possibly a new episode
    first = wait(lambda: (r := row())["peak"] == 9.7 and r)
    env["plant"].value(ACME, "ph", 9.9, t=t + 0.5)  # the same episode: read incrementally
    env["plant"].value(ACME, "ph", 9.6, t=t + 1.0)
    got = wait(lambda: (r := row())["peak"] != 9.7 and r)
    assert (got["peak"], got["peak_text"]) == (9.9, "9.9 pH") and got["peak_time"] == pytest.approx(t + 0.5, abs=1e-3)
    assert got["onset"] == first["onset"]
