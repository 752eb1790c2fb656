"""The compiled parts of pretreat-monitor: `monitor.stores._sealscan`, the seals' minute index in C, and
`monitor.stores._quietscan`, the audit's scan of a channel's readings past the check engine's quiet band, and
`monitor.checks._quietpath`, the daemon's check engine stepping over quiet in-order readings, and
`monitor._untrack`, which takes the daemon's samples out of the cyclic garbage collector's sight,
`monitor.reports._dayaccrue`, the day aggregates' accrual of ordinary readings, `monitor.stores._rowflat`, the
historian's rows (their parameters, and their insert with the GIL released), and `drivers.modbus._blockdecode`, a
Modbus block's good readings as samples.

Everything else is declared in pyproject.toml. The extensions are optional: where they cannot be built (no C
compiler, no Python or SQLite headers) the install still succeeds and the seals and the audit run in Python (the
same bytes and verdicts, slower); `pretreat journal verify` and the health snapshot say which ran. To build it
on Debian: ``apt-get install gcc python3-dev libsqlite3-dev``. It links the system's libsqlite3, the library Python's
sqlite3 module uses, so the process holds one SQLite (two copies would break each other's file locks).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "monitor.stores._sealscan",
    sources=["monitor/stores/_sealscan.c"],
    libraries=["sqlite3"],
    # no fused multiply-add: the minute boundaries must be computed exactly as Python computes them
    extra_compile_args=["-O2", "-ffp-contract=off", "-Wall", "-Wextra"],
    optional=True,
), Extension(
    "monitor.stores._quietscan",
    sources=["monitor/stores/_quietscan.c"],
    libraries=["sqlite3"],
    # no fused multiply-add: the slug minute's sum must be added exactly as Python adds it
    extra_compile_args=["-O2", "-ffp-contract=off", "-Wall", "-Wextra"],
    optional=True,
), Extension(
    "monitor.checks._quietpath",
    sources=["monitor/checks/_quietpath.c"],
    depends=["monitor/_slots.h"],  # the fast paths' shared slot access
    extra_compile_args=["-O2", "-ffp-contract=off", "-Wall", "-Wextra"],
    optional=True,
), Extension(
    "monitor.reports._dayaccrue",
    sources=["monitor/reports/_dayaccrue.c"],
    depends=["monitor/_slots.h"],  # the fast paths' shared slot access
    # no fused multiply-add: the integral's ``+= v0 * gap`` must be rounded exactly as Python rounds it
    extra_compile_args=["-O2", "-ffp-contract=off", "-Wall", "-Wextra"],
    optional=True,
), Extension(
    "monitor.stores._rowflat",
    sources=["monitor/stores/_rowflat.c"],
    depends=["monitor/_slots.h"],  # the fast paths' shared slot access
    # SQLite's functions are looked up in the library Python's sqlite3 module loaded (dlsym): no link to it here
    libraries=["dl"],
    extra_compile_args=["-O2", "-Wall", "-Wextra"],
    optional=True,
), Extension(
    "drivers.modbus._blockdecode",
    sources=["drivers/modbus/_blockdecode.c"],
    depends=["monitor/_slots.h"],  # the fast paths' shared slot access
    # no fused multiply-add: ``raw * scale + offset`` must be rounded exactly as Python rounds it
    extra_compile_args=["-O2", "-ffp-contract=off", "-Wall", "-Wextra"],
    optional=True,
), Extension(
    "monitor._untrack",
    sources=["monitor/_untrack.c"],
    extra_compile_args=["-O2", "-Wall", "-Wextra"],
    optional=True,
)])
