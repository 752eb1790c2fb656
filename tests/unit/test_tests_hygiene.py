"""The test suite's own rules (issue 20): a test module imports helpers from helper modules (tests/support.py,
tests/unit/checks_helpers.py, ...), never from another test module, and no test reaches into the daemon's
links or the dispatcher's lanes (``_links``, ``_lanes``): they use the public views (the health snapshot,
`Dispatcher.outbox`, `Dispatcher.marks`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRIVATE_VIEWS = re.compile(r"\._(links|lanes)\b")


def _is_test_module(module: str) -> bool:
    return module.rpartition(".")[2].startswith("test_") or module.endswith(".conftest")


def imports_of_test_modules(path: Path) -> list[str]:
    """``line: module`` of each import in ``path`` that names a test module or a conftest."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found += [f"{node.lineno}: {n}" for n in names if n.startswith("tests.") and _is_test_module(n)]
    return found


def test_no_test_module_imports_from_another() -> None:
    found = [f"{p.relative_to(ROOT)}:{hit}" for p in sorted((ROOT / "tests").rglob("test_*.py"))
             for hit in imports_of_test_modules(p)]
    assert not found, "helpers belong in a helper module, not in a test module:\n" + "\n".join(found)


def test_no_test_reaches_into_links_or_lanes() -> None:
    this = Path(__file__).resolve()
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tests").rglob("*.py")) if p != this
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if PRIVATE_VIEWS.search(line)]
    assert not found, "\n".join(found)


def test_an_import_from_a_test_module_is_found(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text("import tests.support\nfrom tests.unit.test_replay import ts\n"
                    "def f():\n    import tests.browser.conftest\n", encoding="utf-8")
    assert imports_of_test_modules(path) == ["2: tests.unit.test_replay", "4: tests.browser.conftest"]
