"""ModbusDriver's polling rate against one simulator *process*, without the daemon around it.

The simulator runs as ``python -m simulators.modbus_server site.toml`` in a child process, so the figures are
the driver side's cost plus loopback and one single-threaded server; each poll reads 10 registers (one block)
and yields 10 samples. Four cases: one device on one connection, ``--devices`` devices on as many connections,
as many units behind one gateway connection, and all of them at once; each polls back to back for
``--seconds``. Besides polls/s, the driver side's CPU per poll (this process's user + system time over the
window: the link's Modbus client, the codec, the samples; the simulator is another process). Median of
``--runs`` runs, printed as a markdown table. Every sample must be good, else the
benchmark fails (a fast wrong answer is no figure). It was a test once; it asserted nothing, so it lives here.

    .venv/bin/python bench/bench_modbus_driver.py [--runs 5] [--seconds 2] [--devices 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine
from config.loader import load_config
from drivers.modbus import ModbusDriver, build_modbus_drivers
from tests.support import free_port, wait_for_port

SMOKE_ARGS = ["--runs", "1", "--seconds", "0.5"]


def write_site(folder: Path, devices: int) -> Path:
    points = "".join(f'[[point]]\nname = "r{i}"\ntable = "holding"\naddress = {i}\ntype = "uint16"\n\n'
                     for i in range(10))
    (folder / "ten.toml").write_text(f'name = "ten"\n\n{points}')
    gateway = free_port()
    text = '[daemon]\nhistorian = "h.sqlite"\n\n[[site]]\nid = "bench"\ntimezone = "UTC"\n\n'
    for n in range(devices):  # devices on their own ports, and as many units behind one gateway connection
        text += (f'[[site.instrument]]\nid = "tcp{n}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                 f'port = {free_port()}\nregister_map = "ten.toml"\n\n'
                 f'[[site.instrument]]\nid = "gw{n}"\ndriver = "modbus_tcp"\nhost = "127.0.0.1"\n'
                 f'port = {gateway}\nunit_id = {n + 1}\nregister_map = "ten.toml"\n\n')
        for kind in ("tcp", "gw"):
            text += "".join(f'[[site.channel]]\nid = "{kind}{n}_r{i}"\ninstrument = "{kind}{n}"\n'
                            f'point = "r{i}"\nkind = "other"\nunit = "u"\n\n' for i in range(10))
    site = folder / "site.toml"
    site.write_text(text)
    return site


def start_simulator(site: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "simulators.modbus_server", str(site)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "READY":
            break
    else:
        raise SystemExit(f"simulator exited with {proc.wait()}")
    # keep reading what it prints, so a full pipe never stalls the server being measured
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    for inst in load_config(site).instruments:
        wait_for_port(inst.port)
    return proc


async def rate(drivers: list[ModbusDriver], seconds: float) -> tuple[float, float]:
    """Every driver polls back to back for ``seconds``; returns total polls per second and CPU µs a poll."""
    deadline = time.monotonic() + seconds
    counts = [0] * len(drivers)

    async def loop(k: int, driver: ModbusDriver) -> None:
        while time.monotonic() < deadline:
            samples = await driver.poll()
            if not all(s.good for s in samples):
                raise SystemExit(f"{driver.instrument_id}: a bad sample: {samples[0]}")
            counts[k] += 1

    started, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(loop(k, d) for k, d in enumerate(drivers)))
    polls = sum(counts)
    return polls / (time.monotonic() - started), (time.process_time() - cpu) / max(polls, 1) * 1e6


async def one_run(site: Path, devices: int, seconds: float) -> dict[str, tuple[float, float]]:
    drivers, links = build_modbus_drivers(load_config(site))
    try:
        tcp = [d for d in drivers if d.instrument_id.startswith("tcp")]
        gateway = [d for d in drivers if d.instrument_id.startswith("gw")]
        for d in drivers:  # connect everything before timing
            await d.poll()
        return {
            "1 device, 1 connection": await rate(tcp[:1], seconds),
            f"{devices} devices, {devices} connections": await rate(tcp, seconds),
            f"{devices} units behind 1 gateway connection": await rate(gateway, seconds),
            f"all {2 * devices} devices at once": await rate(drivers, seconds),
        }
    finally:
        for link in links:
            await link.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="polling time of each case in each run")
    p.add_argument("--devices", type=int, default=10)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = write_site(Path(tmp), a.devices)
        proc = start_simulator(site)
        try:
            runs = [asyncio.run(one_run(site, a.devices, a.seconds)) for _ in range(a.runs)]
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"Machine: {machine()}\n")
    print("| ModbusDriver, 10 registers a poll, one simulator process | median polls/s | median CPU µs a poll "
          "| runs (polls/s) |")
    print("|---|---:|---:|---|")
    for case in runs[0]:
        rates = [r[case][0] for r in runs]
        cpu = statistics.median(r[case][1] for r in runs)
        print(f"| {case} | {statistics.median(rates):,.0f} | {cpu:,.0f} | {', '.join(f'{r:,.0f}' for r in rates)} |")


if __name__ == "__main__":
    main()
