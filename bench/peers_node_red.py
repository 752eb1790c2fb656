"""Node-RED for bench/bench_peers.py: its npm install under bench/out/ (git ignores it), its settings and flows.

The flows are what a small utility would build with node-red-contrib-modbus: per device a `modbus-client`
config node (the contrib's defaults, command queue on or off) and a `modbus-getter` reading holding registers
0-9 of unit 1. Each getter's first output goes to a counting function node; all of them add to one object in
the global context that an `http in` endpoint (`GET /bench/counts`) returns with Node-RED's own clock, so the
benchmark reads the counts the way it reads the daemon's health snapshot. `emptyMsgOnFail` is on: without it a
failed read (a timeout, or the queue's "Queue full" rejection when more commands wait than its depth) sends
nothing and would go uncounted; with it the message carries `msg.error` and is counted as an error.

Paced: an `inject` node a device repeats every interval (the getter drops an inject that arrives before its
client is connected). Flat out: the counting function sends a new message back into its getter at once, so each
device has one read in flight, as in the bare pymodbus loop; an `inject` a second restarts a device's loop only
if it produced nothing for 2 s (the getter drops inputs before its client connects, which would end a loop).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).resolve().parent / "out" / "node-red"

PACKAGE: dict[str, Any] = {
    "name": "pretreat-bench-node-red",
    "private": True,
    "dependencies": {"node-red": "~4.1.0", "node-red-contrib-modbus": "5.60.2"},
    # node-red-contrib-modbus depends on a fork, "@openp4nr/modbus-serial", by a tarball URL outside the npm
    # registry; alias it to the upstream modbus-serial from npm.
    "overrides": {"@openp4nr/modbus-serial": "npm:modbus-serial@^8.0.25"},
}

COUNT = """
let c = global.get('bench');
if (!c) { c = {reads: 0, errors: 0, queue_full: 0}; global.set('bench', c); }
const seen = global.get('seen') || {}; seen[%(dev)d] = Date.now(); global.set('seen', seen);
if (msg.error) {
    c.errors += 1;
    if (String(msg.error.message || msg.error).includes('Queue full')) c.queue_full += 1;
} else {
    c.reads += 1;
}
return %(again)s;
"""

KICK = """
const seen = global.get('seen') || {};
return Date.now() - (seen[%(dev)d] || 0) > 2000 ? {payload: 1} : null;
"""

REPORT = """
const c = global.get('bench') || {reads: 0, errors: 0, queue_full: 0};
msg.payload = {time: Date.now(), reads: c.reads, errors: c.errors, queue_full: c.queue_full};
return msg;
"""


def install() -> None:
    """npm install into NODE_DIR, unless what package.json asks for is there already. Without node and npm
    (`make bench` installs Debian's), the run stops here with what to do, before anything is measured."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"bench_peers: {' and '.join(missing)} not found: Node-RED needs Node.js 18 or newer "
                         "with npm (Debian: apt-get install nodejs npm, which `make bench` does), or run with "
                         "--skip-node-red to measure the daemon and bare pymodbus only")
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    package = NODE_DIR / "package.json"
    wanted = json.dumps(PACKAGE, indent=2) + "\n"
    done = (NODE_DIR / "node_modules" / "node-red-contrib-modbus" / "package.json").exists()
    if done and package.exists() and package.read_text() == wanted:
        return
    package.write_text(wanted)
    print(f"npm install in {NODE_DIR} (node-red, node-red-contrib-modbus) ...", file=sys.stderr, flush=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--omit=dev"], cwd=NODE_DIR, check=True,
                   stdout=sys.stderr, timeout=1800)


def node_red_versions() -> str:
    def version(*parts: str) -> str:
        path = NODE_DIR.joinpath("node_modules", *parts, "package.json")
        return str(json.loads(path.read_text())["version"]) if path.exists() else "?"

    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return (f"node-red {version('node-red')}, node-red-contrib-modbus {version('node-red-contrib-modbus')} "
            f"(its @openp4nr/modbus-serial aliased to modbus-serial {version('@openp4nr', 'modbus-serial')} from "
            f"npm), node {node}")


def settings_js(port: int) -> str:
    """Node-RED's settings: its defaults, on loopback, quiet, with the flows file of this directory."""
    return ("module.exports = {\n"
            f"  uiPort: {port}, uiHost: '127.0.0.1', flowFile: 'flows.json', credentialSecret: false,\n"
            "  logging: {console: {level: 'error', metrics: false, audit: false}},\n"
            "  diagnostics: {enabled: false}, editorTheme: {tours: false},\n"
            "};\n")


def flows(ports: list[int], interval: float, *, buffer_commands: bool) -> list[dict[str, Any]]:
    """The flow of a run: ``interval`` 0 is flat out (see the module doc)."""
    tab = "bench-tab"
    out: list[dict[str, Any]] = [{"id": tab, "type": "tab", "label": "bench"}]
    for dev, port in enumerate(ports):
        client, getter, count, kick = (f"{kind}-{dev}" for kind in ("client", "getter", "count", "kick"))
        out.append({"id": client, "type": "modbus-client", "name": f"dev{dev}", "clienttype": "tcp",
                    "bufferCommands": buffer_commands, "stateLogEnabled": False, "queueLogEnabled": False,
                    "failureLogEnabled": False, "tcpHost": "127.0.0.1", "tcpPort": str(port),
                    "tcpType": "DEFAULT", "serialPort": "/dev/ttyUSB", "serialType": "RTU-BUFFERD",
                    "serialBaudrate": "9600", "serialDatabits": "8", "serialStopbits": "1",
                    "serialParity": "none", "serialConnectionDelay": "100",
                    "serialAsciiResponseStartDelimiter": "0x3A", "unit_id": "1", "commandDelay": "1",
                    "clientTimeout": "1000", "reconnectOnTimeout": True, "reconnectTimeout": "2000",
                    "parallelUnitIdsAllowed": True, "showErrors": False, "showWarnings": False,
                    "showLogs": False})
        out.append({"id": getter, "type": "modbus-getter", "z": tab, "name": f"read dev{dev}",
                     "showStatusActivities": False, "showErrors": False, "showWarnings": False,
                     "logIOActivities": False, "unitid": "1", "dataType": "HoldingRegister", "adr": "0",
                     "quantity": "10", "server": client, "useIOFile": False, "ioFile": "",
                     "useIOForPayload": False, "emptyMsgOnFail": True, "keepMsgProperties": False,
                     "delayOnStart": False, "startDelayTime": "", "wires": [[count], []]})
        flat = interval == 0
        out.append({"id": count, "type": "function", "z": tab, "name": "count", "outputs": 1, "noerr": 0,
                    "func": COUNT % {"dev": dev, "again": "{payload: 1}" if flat else "null"},
                    "wires": [[getter]] if flat else [[]]})
        if flat:
            out.append({"id": kick, "type": "function", "z": tab, "name": "start loop", "outputs": 1,
                        "noerr": 0, "func": KICK % {"dev": dev}, "wires": [[getter]]})
        out.append({"id": f"inject-{dev}", "type": "inject", "z": tab, "name": "", "props": [{"p": "payload"}],
                    "repeat": "1" if flat else f"{interval:g}", "crontab": "", "once": True,
                    "onceDelay": "0.5", "topic": "", "payload": "", "payloadType": "date",
                    "wires": [[kick if flat else getter]]})
    out += [{"id": "counts-in", "type": "http in", "z": tab, "name": "", "url": "/bench/counts",
             "method": "get", "upload": False, "swaggerDoc": "", "wires": [["counts-fn"]]},
            {"id": "counts-fn", "type": "function", "z": tab, "name": "counts", "outputs": 1, "noerr": 0,
             "func": REPORT, "wires": [["counts-out"]]},
            {"id": "counts-out", "type": "http response", "z": tab, "name": "", "statusCode": "",
             "headers": {}, "wires": []}]
    return out
