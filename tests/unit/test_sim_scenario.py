"""Scenario files: shipped ones load and fit the demo site; mistakes are reported with file and key path."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from config.errors import ConfigErrors
from config.loader import load_config
from config.schema import ChannelKind, SiteConfig
from simulators.playback import Hold, Playback, Ramp, resolve, short_steps
from simulators.process import SiteProcess
from simulators.scenario import FaultKind, load_scenario, shipped_scenarios

DEMO = Path(__file__).resolve().parents[2] / "config" / "sites" / "demo.toml"
REQUIRED = {"normal", "ph_excursion", "hot_discharge", "solvent_vapour", "slug", "sampler_fridge_failure",
            "device_silent", "device_exceptions", "garbage_values"}


@pytest.fixture(scope="module")
def demo() -> SiteConfig:
    return load_config(DEMO)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "case.toml"
    path.write_text(text)
    return path


def _errors(path: Path, config: SiteConfig | None = None) -> list[str]:
    with pytest.raises(ConfigErrors) as info:
        scenario = load_scenario(path)
        if config is not None:
            resolve(scenario, config)
    return [f"{e.path}: {e.found!r} / {e.expected}" for e in info.value.errors]


def test_every_required_scenario_is_shipped_and_fits_the_demo_site(demo: SiteConfig) -> None:
    assert REQUIRED <= set(shipped_scenarios())
    for name in shipped_scenarios():
        resolved = resolve(load_scenario(name), demo)
        assert resolved.scenario.name == name
        assert resolved.scenario.description
        # each step visible to a 1 s poll: at speed 60 for the test scenarios, at real time for `make demo`'s
        speed = 1.0 if name == "demo" else 60.0
        assert short_steps(resolved, demo, speed=speed) == []


def _served(demo: SiteConfig, name: str, channel: str, times: range) -> dict[int, float]:
    playback = Playback(resolve(load_scenario(name), demo))
    proc = SiteProcess(site=demo.sites[0], seed=1, day_offset=10 * 3600.0)
    out = {}
    for t in times:
        playback.due(float(t), lambda ch, at: proc.base_value(ch.id, at))
        out[t] = proc.step(float(t), playback.overrides.get("acme-plating"))[channel]
    return out


def test_ph_excursion_goes_below_5_for_a_while_then_recovers(demo: SiteConfig) -> None:
    ph = _served(demo, "ph_excursion", "ph", range(0, 1201, 10))
    low = [t for t, v in ph.items() if v < 5.0]
    assert low and min(low) > 300 and max(low) - min(low) >= 600
    assert 7.0 <= ph[1200] <= 7.4


def test_hot_discharge_passes_40_then_65(demo: SiteConfig) -> None:
    temp = _served(demo, "hot_discharge", "temperature", range(0, 1081, 10))
    first_40 = min(t for t, v in temp.items() if v > 40)
    first_65 = min(t for t, v in temp.items() if v > 65)
    assert first_40 < first_65
    assert temp[1080] < 25


def test_solvent_vapour_two_successive_over_5_then_one_at_12(demo: SiteConfig) -> None:
    lel = _served(demo, "solvent_vapour", "lel", range(0, 481, 60))
    assert [lel[60], lel[120]] == [6.0, 7.0]
    assert lel[180] < 5 and lel[240] < 5 and lel[300] == 12.0 and lel[360] < 5


def test_slug_is_over_5x_average_for_over_15_minutes(demo: SiteConfig) -> None:
    flow = _served(demo, "slug", "flow", range(0, 1801, 10))
    proc = SiteProcess(site=demo.sites[0], seed=1, day_offset=0.0)
    day_average = sum(proc.step(float(t))["flow"] for t in range(0, 86400, 60)) / 1440
    high = [t for t, v in flow.items() if v > 5 * day_average]
    assert max(high) - min(high) > 15 * 60


def test_fridge_failure_drifts_to_9(demo: SiteConfig) -> None:
    fridge = _served(demo, "sampler_fridge_failure", "sampler_temperature", range(0, 2401, 60))
    assert fridge[2400] == pytest.approx(9.0)
    assert fridge[300] < 6.0


def test_garbage_values_serve_nan_and_out_of_range(demo: SiteConfig) -> None:
    flow = _served(demo, "garbage_values", "flow", range(0, 601, 60))
    assert math.isnan(flow[60]) and math.isfinite(flow[180])
    ph = _served(demo, "garbage_values", "ph", range(0, 601, 60))
    assert ph[180] == 15.5 and ph[300] < 8


def test_ramp_starts_from_the_value_being_served(demo: SiteConfig) -> None:
    playback = Playback(resolve(load_scenario("ph_excursion"), demo))
    playback.due(300.0, lambda ch, at: 7.25)
    ramp = playback.overrides["acme-plating"]["ph"]
    assert isinstance(ramp, Ramp)
    assert (ramp.value_at(300), ramp.value_at(330), ramp.value_at(999)) == (7.25, pytest.approx(5.925), 4.6)


def test_fault_steps_are_handed_out_in_time_order(demo: SiteConfig, tmp_path: Path) -> None:
    path = _write(tmp_path, """
[[step]]
at = 20
instrument = "flow-meter"
fault = "none"
[[step]]
at = 10
kind = "flow"
fault = "silent"
[[step]]
at = 10
channel = "ph"
value = 6.5
""")
    playback = Playback(resolve(load_scenario(path), demo))
    assert playback.due(5.0, lambda ch, at: 0.0) == []
    fired = playback.due(10.0, lambda ch, at: 0.0)
    assert [rs.step.path for rs in fired] == ["step[1]", "step[2]"]  # same time: file order
    assert playback.faults[("acme-plating", "flow-meter")] is FaultKind.SILENT
    assert playback.overrides["acme-plating"]["ph"] == Hold(6.5)
    playback.due(25.0, lambda ch, at: 0.0)
    assert playback.faults[("acme-plating", "flow-meter")] is FaultKind.NONE and playback.finished


@pytest.mark.parametrize(("text", "expected"), [
    ("[[step]]\nat = 1\nkind = 'ph'\n", "step[0].value: (missing) / exactly one action"),
    ("[[step]]\nat = 1\nkind = 'ph'\nvalue = 5\nclear = true\n",
     "step[0].clear: {'value': 5, 'clear': True}"),
    ("[[step]]\nat = 1\nkind = 'ph'\nto = 5\n", "step[0].over: (missing) / a number > 0"),
    ("[[step]]\nat = -1\nkind = 'ph'\nvalue = 5\n", "step[0].at: -1 / a number >= 0"),
    ("[[step]]\nat = 1\nkind = 'acidity'\nvalue = 5\n", "step[0].kind: 'acidity' / one of ['flow'"),
    ("[[step]]\nat = 1\nkind = 'ph'\nfault = 'melted'\n", "step[0].fault: 'melted' / one of ['none'"),
    ("[[step]]\nat = 1\nkind = 'ph'\nfault = 'silent'\ndown = 3\n", "step[0].down: 3 / no such key unless"),
    ("[[step]]\nat = 1\nkind = 'ph'\nvalue = 'low'\n", "step[0].value: 'low' / a number"),
    ("[[step]]\nat = 1\ninstrument = 'ph-meter'\nvalue = 5\n",
     "step[0].instrument: {'instrument': 'ph-meter'}"),
    ("[[step]]\nat = 1\nkind = 'ph'\nchannel = 'ph'\nvalue = 5\n", "exactly one target"),
    ("[[step]]\nat = 1\nkind = 'ph'\nvalue = 5\nwhen = 3\n", "step[0].when: 3 / one of the known keys"),
    ("[[step]]\nat = 1\nkind = 'ph'\nto = nan\nover = 5\n", "step[0].to: nan / a finite number"),
    ("speed = 3\n", "speed: 3 / one of the known keys"),
    ("[[step]\n", "(syntax)"),
])
def test_file_mistakes_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    errors = _errors(_write(tmp_path, text))
    assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(("text", "expected"), [
    ("[[step]]\nat = 1\nchannel = 'acidity'\nvalue = 5\n", "step[0].channel: 'acidity' / a channel present"),
    ("[[step]]\nat = 1\nkind = 'conductivity'\nvalue = 5\n", "step[0].kind: 'conductivity' / a kind present"),
    ("[[step]]\nat = 1\nkind = 'ph'\nsite = 'nowhere'\nvalue = 5\n", "step[0].site: 'nowhere'"),
    ("[[step]]\nat = 1\ninstrument = 'pump'\nfault = 'silent'\n", "step[0].instrument: 'pump'"),
    ("[[step]]\nat = 1\nkind = 'ph'\nvalue = nan\n", "step[0].value: nan / a finite number (int16"),
    ("[[step]]\nat = 1\nkind = 'ph'\nvalue = 400\n", "can hold (-327.68 to 327.67 pH) for channel 'ph'"),
    ("[[step]]\nat = 1\nkind = 'sampler_fault'\nvalue = 2\n", "step[0].value: 2.0 / 0 or 1 (a bit)"),
    ("[[step]]\nat = 1\nkind = 'lel'\nfault = 'exception'\n", "step[0].fault: 'exception'"),
    ("[[model]]\nkind = 'ph'\nmeen = 7\n", "model[0].meen: 7.0 / a parameter of the ph model"),
    ("[[model]]\nkind = 'sampler_count'\npace = 'hourly'\n", "model[0].pace: 'hourly' / one of ['time'"),
    ("[[model]]\nkind = 'sampler_count'\ninterval = 0\n", "model[0].interval: 0.0 / a number > 0"),
])
def test_mistakes_against_the_site_name_the_step(demo: SiteConfig, tmp_path: Path, text: str,
                                                   expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigErrors) as info:
        resolve(load_scenario(path), demo)
    assert all(e.file == str(path) for e in info.value.errors)
    messages = [f"{e.path}: {e.found!r} / {e.expected}" for e in info.value.errors]
    assert any(expected in m for m in messages), messages


def test_every_mistake_is_reported_at_once(demo: SiteConfig, tmp_path: Path) -> None:
    path = _write(tmp_path, "[[step]]\nat = 1\nchannel = 'x'\nvalue = 1\n"
                            "[[step]]\nat = 2\nchannel = 'y'\nvalue = 1\n")
    with pytest.raises(ConfigErrors) as info:
        resolve(load_scenario(path), demo)
    assert [e.path for e in info.value.errors] == ["step[0].channel", "step[1].channel"]


def test_unknown_scenario_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigErrors) as info:
        load_scenario("no_such_thing")
    assert "ph_excursion" in str(info.value)


def test_model_settings_reach_the_models(demo: SiteConfig, tmp_path: Path) -> None:
    path = _write(tmp_path, "[[model]]\nkind = 'sampler_count'\ninterval = 60\ncapacity = 3\n"
                            "[[model]]\nchannel = 'ph'\nmean = 8.5\nnoise = 0\n")
    resolved = resolve(load_scenario(path), demo)
    proc = SiteProcess(site=demo.sites[0], params=resolved.params["acme-plating"])
    rows = [proc.step(float(t)) for t in range(0, 301, 30)]
    assert rows[-1]["ph"] == 8.5
    assert [r["sampler_count"] for r in rows][::2] == [0.0, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert rows[-1]["sampler_bottle_full"] == 1.0
    assert ChannelKind.SAMPLER_COUNT.value in path.read_text()
