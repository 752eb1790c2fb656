"""Fetch the `uv` installer's binary from the Python package index, for `make demo` and `make test`.

Why: on this project's 2-core reference machine, from a fresh clone with an empty cache, `python3 -m venv` plus
`pip install -e .` took 137 s, `uv venv` plus `uv pip install -e .` 21 s, at load average 8 to 10 (uv resolves and
downloads in parallel and needs no pip inside the venv). The time from a fresh clone to the demo's first reading is
mostly that install.

How: the wheel of a pinned uv release for this machine is looked up in the index's JSON simple API (PEP 691),
downloaded, checked against the index's sha256, and the one binary it holds (`uv-VERSION.data/scripts/uv`) is
written to the path given. Standard library only: a stock Debian 12 has no pip. On any failure the script says why
on stderr and exits 1, and the Makefile falls back to pip, so an offline machine with its own pip mirror still works.

    python3 scripts/get_uv.py var/tools/uv
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import sys
import urllib.request
import zipfile
from pathlib import Path

UV_VERSION = "0.13.9"
INDEX = os.environ.get("PRETREAT_UV_INDEX", "https://pypi.org/simple")
TIMEOUT_S = 60

# Wheel platform tags by `platform.machine()`, glibc first; musl systems (Alpine) take the musllinux wheel.
GLIBC_TAGS = {
    "x86_64": "manylinux_2_17_x86_64",
    "aarch64": "manylinux_2_17_aarch64",
}
MUSL_TAGS = {
    "x86_64": "musllinux_1_1_x86_64",
    "aarch64": "musllinux_1_1_aarch64",
}


def wheel_tag() -> str:
    """The platform tag of the uv wheel that runs here; ValueError when uv publishes none for this machine."""
    if sys.platform != "linux":
        raise ValueError(f"this fetcher knows Linux wheels only, not {sys.platform}")
    machine = platform.machine()
    libc, _ = platform.libc_ver()
    tags = GLIBC_TAGS if libc == "glibc" else MUSL_TAGS
    if machine not in tags:
        raise ValueError(f"no uv wheel known for machine {machine!r}")
    return tags[machine]


def find_wheel(tag: str) -> tuple[str, str]:
    """(url, sha256) of the pinned release's wheel carrying `tag`, from the index's JSON simple page."""
    request = urllib.request.Request(
        f"{INDEX.rstrip('/')}/uv/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        page = json.load(response)
    prefix = f"uv-{UV_VERSION}-"
    for entry in page.get("files", []):
        name = entry["filename"]
        if name.startswith(prefix) and name.endswith(".whl") and tag in name:
            return entry["url"], entry["hashes"]["sha256"]
    raise ValueError(f"the index {INDEX} lists no uv {UV_VERSION} wheel for {tag}")


def fetch(target: Path) -> None:
    url, sha256 = find_wheel(wheel_tag())
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        wheel = response.read()
    got = hashlib.sha256(wheel).hexdigest()
    if got != sha256:
        raise ValueError(f"{url}: sha256 {got} is not the index's {sha256}")
    member = f"uv-{UV_VERSION}.data/scripts/uv"
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        binary = archive.read(member)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: get_uv.py TARGET", file=sys.stderr)
        return 2
    try:
        fetch(Path(argv[1]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        print(f"get_uv.py: could not fetch uv {UV_VERSION} ({error}); installing with pip instead", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
