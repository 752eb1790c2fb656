"""Dependencies point one way: no module imports from a layer above its own.

The layers, lowest first, are the README's ("How it is built"); `LAYER_OF` is that table as data. A module
belongs to the layer of the longest entry that is a prefix of its dotted name. Every import counts: at module
level, inside a function (imported late to keep start-up light) and under ``TYPE_CHECKING`` (a type that comes
from above is a dependency on above all the same).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "drivers", "monitor", "alarms", "simulators")

LAYERS = (
    "config",  # the site file, its schema and loader, and the vocabularies it is written in
    "samples",  # what a driver produces: Sample, Quality, the clock, numbers as text
    "drivers",  # Modbus and MQTT
    "monitor core",  # checks, staleness, polls, stores, aggregates and reports, log text
    "alarms and delivery",  # alarm engine, notifiers, the Modbus gateway
    "daemon",  # the composition root: starts and stops all of the above
    "read side, console and commands",  # what reads the record, the CLI, the simulators
)

LAYER_OF: dict[str, int] = {
    "config": 0,
    # The alarm vocabulary the site file's [alarms] and [notify] tables are written in (priorities, kinds,
    # AlarmSettings); it imports nothing of the project.
    "alarms.model": 0,
    "monitor.sample": 1,
    "monitor._untrack": 1,  # the samples' C helper (monitor.sample.release_from_gc)
    "monitor.clock": 1,
    "monitor.number_text": 1,
    "drivers": 2,
    "monitor": 3,
    # The record's hash chain: a store the episode store and the seals write (it imports nothing of the project).
    "alarms.journal": 3,
    "alarms": 4,
    "monitor.app": 5,
    "monitor.alarming": 5,
    "monitor.warmup": 5,
    "monitor.integrity": 5,  # the record guard: it raises the record-integrity alarm
    # What reads the record (never writes it) and the commands; the simulators, because `pretreat seed`
    # records history through the daemon.
    "monitor.read": 6,
    "monitor.console": 6,
    "monitor.status": 6,
    "monitor.tail": 6,
    "monitor.exceedances": 6,
    "monitor.exceedances_render": 6,
    "monitor.export": 6,
    "monitor.export_render": 6,
    "monitor.replay": 6,
    "monitor.audit": 6,  # `pretreat audit`: replays the record and compares (reads, never writes)
    "monitor.hub.cli": 6,  # `pretreat hub`; the hub itself (monitor.hub) is monitor core
    "monitor.cli": 6,
    "monitor.commands": 6,
    "monitor.alarms_cli": 6,
    "monitor.influx_cli": 6,
    "monitor.rules_cli": 6,
    "monitor.obligations_cli": 6,
    "monitor.maps_cli": 6,
    "monitor.calibration_cli": 6,
    "monitor.reports.cli": 6,
    "monitor.cli_render": 6,  # how the command-line tables show times and numbers
    "monitor.cli_auth": 6,  # who acts on an alarm from the command line (the console's users)
    "monitor.notices.cli": 6,
    "simulators": 6,
}


def layer_of(module: str) -> int | None:
    """The layer of a dotted module name; None for a module outside the project (the standard library, paho)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        layer = LAYER_OF.get(".".join(parts[:n]))
        if layer is not None:
            return layer
    return None


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    module: str
    imported: str

    def __str__(self) -> str:
        own, their = layer_of(self.module), layer_of(self.imported)
        assert own is not None and their is not None
        return (f"{self.path}:{self.line}: {self.module} ({LAYERS[own]}) imports {self.imported} "
                f"({LAYERS[their]}), a layer above its own")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(root: Path, base: str, name: str) -> str:
    """``from base import name``: the submodule ``base.name`` when there is one, else ``base`` itself."""
    candidate = Path(root, *base.split("."), name)
    if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
        return f"{base}.{name}"
    return base


def imports_of(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in one file, relative imports resolved."""
    module = module_name(root, path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            found += [(node.lineno, _resolve(root, base, alias.name)) for alias in node.names]
    return sorted(set(found))


def violations(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Violation]:
    found: list[Violation] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(root, path)
            own = layer_of(module)
            assert own is not None, f"{path}: no layer in LAYER_OF for {module}"
            for line, imported in imports_of(root, path):
                their = layer_of(imported)
                if their is not None and their > own:
                    found.append(Violation(str(path.relative_to(root)), line, module, imported))
    return found


def test_no_module_imports_against_the_direction() -> None:
    found = violations(ROOT)
    assert not found, "imports against the direction of the layers (README, How it is built):\n" + "\n".join(
        map(str, found))


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_an_import_against_the_direction_is_found_and_named(tmp_path: Path) -> None:
    """A synthetic tree with one import of each kind against the direction (module level, relative, late,
    type-only) and imports along it: exactly the four are reported, each naming its file, line and import."""
    for package in PACKAGES:
        _write(tmp_path, f"{package}/__init__.py", "")
    _write(tmp_path, "monitor/app.py", "")
    _write(tmp_path, "monitor/stores/__init__.py", "")
    _write(tmp_path, "monitor/stores/historian.py", "from monitor import sample\nimport config.schema\n")
    _write(tmp_path, "monitor/sample.py", "")
    _write(tmp_path, "config/schema.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                         "    from alarms.engine import AlarmEngine\n")
    _write(tmp_path, "alarms/engine.py", "from monitor.stores import historian\n")
    _write(tmp_path, "drivers/base.py", "def f():\n    from monitor.app import Daemon\n")
    _write(tmp_path, "monitor/stores/episodes.py", "from ..app import Daemon\nfrom . import historian\n")
    _write(tmp_path, "monitor/staleness.py", "import alarms.engine\n")
    _write(tmp_path, "simulators/seed.py", "from monitor.app import Daemon\n")

    found = sorted(str(v) for v in violations(tmp_path))

    assert found == [
        "config/schema.py:3: config.schema (config) imports alarms.engine (alarms and delivery), "
        "a layer above its own",
        "drivers/base.py:2: drivers.base (drivers) imports monitor.app (daemon), a layer above its own",
        "monitor/staleness.py:1: monitor.staleness (monitor core) imports alarms.engine (alarms and delivery), "
        "a layer above its own",
        "monitor/stores/episodes.py:1: monitor.stores.episodes (monitor core) imports monitor.app (daemon), "
        "a layer above its own",
    ]


def test_the_readme_names_every_layer_in_order() -> None:
    """The README's table (How it is built) is this one: same layers, same order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layers = re.findall(r"^\| (\d\. [a-z ,]+?) \| ", readme, flags=re.MULTILINE)
    assert layers == [f"{n}. {name}" for n, name in enumerate(LAYERS, 1)]


def test_every_module_of_the_tree_has_a_layer() -> None:
    """A new top-level package must be placed in the table before its imports can be judged."""
    tops = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"tests", "bench"}
    assert tops == set(PACKAGES)
    for package in PACKAGES:
        assert layer_of(package) is not None


def test_every_command_module_is_in_the_command_layer() -> None:
    """A new ``*_cli.py`` (or a package's ``cli.py``) is a command: left out of `LAYER_OF` it would be judged
    as monitor core, and an import of the read side from it would be reported against the direction."""
    commands = [module_name(ROOT, p) for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
                if p.stem == "cli" or p.stem.endswith("_cli")]
    assert commands and {m: LAYERS[layer_of(m) or 0] for m in commands} == dict.fromkeys(commands, LAYERS[6])


def test_loading_a_site_file_loads_nothing_above_config() -> None:
    """What the layers buy at run time: `pretreat check-config` (the loader) loads nothing of the daemon. It
    used to load the alarm gateway and, through it, the historian's SQL module (and the checks, the reports)."""
    code = ("import sys, config.loader\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('monitor', 'alarms', 'drivers', 'simulators', 'pymodbus', 'paho')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert ast.literal_eval(loaded.stdout.strip()) == ["alarms", "alarms.model"]
