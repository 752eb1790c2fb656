"""Rough polling throughput of ModbusDriver against one simulator *process* (printed, never asserted).

The simulator runs as ``python -m simulators.modbus_server site.toml`` in a child process, so the numbers are
the daemon side's cost plus loopback and one single-threaded server; each poll reads 10 registers (one block)
and yields 10 samples. Only correctness (every sample good) is asserted.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.loader import load_config
from drivers.modbus import ModbusDriver, build_modbus_drivers
from tests.support import free_port, wait_for_port

DEVICES = 10
RUN_SECONDS = 0.6


def _site(tmp_path: Path) -> Path:
    points = "".join(f'[[point]]\nname = "r{i}"\ntable = "holding"\naddress = {i}\ntype = "uint16"\n\n'
                     for i in range(10))
    (tmp_path / "ten.toml").write_text(f'name = "ten"\n\n{points}')
    gateway = free_port()
    text = '[daemon]\nhistorian = "h.sqlite"\n\n[[site]]\nid = "bench"\ntimezone = "UTC"\n\n'
    for n in range(DEVICES):  # ten devices on ten ports, and ten units behind one gateway connection
        text += (f'[[site.instrument]]\nid = "tcp{n}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                 f'port = {free_port()}\nregister_map = "ten.toml"\n\n'
                 f'[[site.instrument]]\nid = "gw{n}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                 f'port = {gateway}\nunit_id = {n + 1}\nregister_map = "ten.toml"\n\n')
        for kind in ("tcp", "gw"):
            text += "".join(f'[[site.channel]]\nid = "{kind}{n}_r{i}"\ninstrument = "{kind}{n}"\n'
                            f'point = "r{i}"\nkind = "other"\nunit = "u"\n\n' for i in range(10))
    site = tmp_path / "site.toml"
    site.write_text(text)
    return site


@pytest.fixture
def simulator_process(tmp_path: Path) -> Iterator[Path]:
    site = _site(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "simulators.modbus_server", str(site)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "READY":
                break
        else:
            pytest.fail(f"simulator exited with {proc.wait()}")
        for inst in load_config(site).instruments:
            wait_for_port(inst.port)
        yield site
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def _rate(drivers: list[ModbusDriver]) -> float:
    """Every driver polls back to back for RUN_SECONDS; returns total polls per second."""
    deadline = time.monotonic() + RUN_SECONDS
    counts = [0] * len(drivers)

    async def loop(k: int, driver: ModbusDriver) -> None:
        while time.monotonic() < deadline:
            samples = await driver.poll()
            assert all(s.good for s in samples)
            counts[k] += 1

    started = time.monotonic()
    await asyncio.gather(*(loop(k, d) for k, d in enumerate(drivers)))
    return sum(counts) / (time.monotonic() - started)


async def test_polls_per_second_against_one_simulator_process(simulator_process: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    drivers, links = build_modbus_drivers(load_config(simulator_process))
    try:
        tcp = [d for d in drivers if d.instrument_id.startswith("tcp")]
        gateway = [d for d in drivers if d.instrument_id.startswith("gw")]
        for d in drivers:  # connect everything before timing
            await d.poll()
        results = {
            "1 device, 1 connection": await _rate(tcp[:1]),
            f"{DEVICES} devices, {DEVICES} connections": await _rate(tcp),
            f"{DEVICES} units behind 1 gateway connection": await _rate(gateway),
            f"all {2 * DEVICES} devices at once": await _rate(drivers),
        }
    finally:
        for link in links:
            await link.close()
    with capsys.disabled():
        print("\nModbusDriver polls/s (10 registers, 10 samples each) vs one simulator process:")
        for name, rate in results.items():
            print(f"  {name:<45} {rate:8.0f}")
