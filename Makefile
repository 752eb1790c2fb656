# pretreat-monitor: `make demo` and `make test` are the two commands a newcomer needs.
# Both create the virtualenv and install what they need, Debian packages too (as root, or with sudo).
# `make demo` installs only what the daemon needs; `make test` adds the test tools, so `make test` after
# `make demo` installs just the difference.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
# Two stamps: the package with what the daemon needs (`pip install -e .`), then the test extras on top.
STAMP      := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp
# The installer (scripts/get_uv.py), kept beside the venv so the venv holds only what the daemon runs on.
UV     := var/tools/uv
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

# Debian packages, as package:command (a package is installed when its command is missing) or package:/file
# (installed when that file is missing).
# Building the package (`pip install -e .`, before anything else): the seals' C scanner (setup.py,
# monitor/stores/_sealscan.c) needs a C compiler and the headers of this Python and of the system's SQLite (the
# library Python's sqlite3 module uses). Without them the install still succeeds and seals run in Python, slower.
PY_INCLUDE := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
BUILD_DEBS := gcc:gcc python3-dev:$(PY_INCLUDE)/Python.h libsqlite3-dev:/usr/include/sqlite3.h
# The demo: mosquitto (the MQTT broker the LEL meter publishes to), socat (the pH meter's RS-485 pty pair).
DEMO_DEBS := mosquitto:mosquitto socat:socat
# The tests add: victoria-metrics (the InfluxDB write API), chromium (console browser tests), poppler-utils
# (pdftoppm renders report pages), openssl (test certificates), strace (the systemd unit's system-call filter,
# emulated in a test), stress-ng (`make test-loaded` burns two cores beside the suite), postgresql (the hub's
# database; tests initdb a throw-away cluster).
TEST_DEBS := $(DEMO_DEBS) victoria-metrics:victoria-metrics chromium:chromium poppler-utils:pdftoppm \
             openssl:openssl strace:strace stress-ng:stress-ng postgresql:initdb
# `make bench` adds Node.js and npm: bench/bench_peers.py installs Node-RED from npm to measure the daemon beside it.
BENCH_DEBS := nodejs:node npm:npm

# Installs the Debian packages of a list above whose command is missing (on PATH, in /usr/sbin, or among the
# server programs Debian keeps off PATH in /usr/lib/postgresql/<version>/bin).
define install_debs
	@missing=""; \
	for pair in $(1); do \
	  case "$${pair#*:}" in /*) [ -e "$${pair#*:}" ] || missing="$$missing $${pair%%:*}"; continue;; esac; \
	  command -v "$${pair#*:}" >/dev/null || [ -x "/usr/sbin/$${pair#*:}" ] || \
	    ls /usr/lib/postgresql/*/bin/"$${pair#*:}" >/dev/null 2>&1 || missing="$$missing $${pair%%:*}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(APT) update -qq && $(APT) install -y -qq $$missing >/dev/null; \
	fi
endef

.PHONY: demo docx test test-loaded test-slow lint bench build-deps demo-deps test-deps bench-deps system-deps clean

# The virtualenv is made without pip and filled by uv (scripts/get_uv.py fetches the pinned release's binary from
# the package index): from an empty cache that is ~20 s where `python3 -m venv` + pip took ~140 s here. A `uv` on
# PATH is used as it is. When uv cannot be had or fails (offline, a pip-only mirror), pip installs instead; a stock
# Debian 12 lacks python3-venv (pip inside a venv), so that path installs it first.
$(PY):
	@$(PYTHON) -m venv --without-pip $(VENV)
	@if command -v uv >/dev/null; then mkdir -p $(dir $(UV)) && ln -sf "$$(command -v uv)" $(UV); \
	 elif [ ! -x $(UV) ]; then $(PYTHON) scripts/get_uv.py $(UV) || true; fi

# $(1): what to install, as pip spells it.
define venv_install
	@echo "installing $(1) into $(VENV)"; \
	if [ -x $(UV) ] && $(UV) pip install -q --python $(PY) $(1); then :; else \
	  $(PY) -m pip --version >/dev/null 2>&1 || $(PY) -m ensurepip >/dev/null 2>&1 || { \
	    echo "pip in a venv needs Debian's python3-venv: installing it"; \
	    $(APT) update -qq && $(APT) install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); }; \
	  $(PIP) --no-compile $(1); \
	fi
endef

# Bytecode for the project and for the modules its commands and daemon import at start is written once, at
# install (scripts/compile_bytecode.py, ~3 s, ~3 MB): Python writes none itself where PYTHONDONTWRITEBYTECODE is
# set (container images) or the venv is not the user's to write, and then compiles every imported module's source
# at every start (0.3 s of a 100-device site's check-config here). Not every installed package (uv's
# --compile-bytecode): +45 MB, mostly numpy and matplotlib, which only the report renderers import.
# build-deps first: the install compiles the seals' and the audit's C scanners, the live engine's quiet path and
# the samples' untracking, the day aggregates' accrual, the historian's row parameters and the Modbus driver's
# block decoding (an edit of their sources or setup.py rebuilds them)
$(STAMP): pyproject.toml setup.py monitor/stores/_sealscan.c monitor/stores/_quietscan.c \
          monitor/checks/_quietpath.c monitor/_untrack.c monitor/reports/_dayaccrue.c \
          monitor/stores/_rowflat.c drivers/modbus/_blockdecode.c monitor/_slots.h | $(PY) build-deps
	$(call venv_install,-e .)
	@$(PY) scripts/compile_bytecode.py || echo "some bytecode not written (above): those modules compile at each start"
	@touch $@

$(TEST_STAMP): $(STAMP)
	$(call venv_install,-e '.[test]')
	@touch $@

build-deps:
	$(call install_debs,$(BUILD_DEBS))

demo-deps:
	$(call install_debs,$(DEMO_DEBS))

test-deps:
	$(call install_debs,$(TEST_DEBS))

bench-deps:
	$(call install_debs,$(BENCH_DEBS))

system-deps: build-deps test-deps

demo: $(STAMP) demo-deps
	@bash scripts/demo.sh

# Word drafts of notices of violation (`pretreat nov --format docx`): python-docx, the one optional extra the
# daemon's install leaves out (`make test` has it too)
docx: $(STAMP)
	$(call venv_install,-e '.[docx]')

# The fast suite (what developers run); CI runs it, then again under load, then the slow one. Two pytest-xdist
# workers: most tests wait on servers and daemons they start, so two at a time fill the machine's two cores
# (every server a test starts is on its own free port, every file under its own tmp_path). --durations names
# the slowest tests in every log. --dist loadfile: a file's tests run on one worker in their order (the browser
# scenarios of a file share one console and build on each other's acknowledgements).
XDIST ?= -n 2 --dist loadfile
test: $(TEST_STAMP) test-deps lint
	$(PY) -m pytest -q $(XDIST) --durations=15 -m "not slow"

# The fast suite with two CPU-burning processes beside it, as on a busy machine: a test that passes only when
# it is scheduled promptly fails here. The burners stop when the suite ends, however it ends (and after an
# hour at most, should this shell be killed).
test-loaded: $(TEST_STAMP) test-deps
	@stress-ng --cpu 2 --timeout 3600 --quiet & burner=$$!; \
	trap 'kill $$burner 2>/dev/null; wait $$burner 2>/dev/null' INT TERM; \
	echo "stress-ng --cpu 2 running beside the suite (pid $$burner)"; \
	$(PY) -m pytest -q $(XDIST) --durations=15 -m "not slow"; status=$$?; \
	kill $$burner 2>/dev/null; wait $$burner 2>/dev/null; \
	exit $$status

test-slow: $(TEST_STAMP) test-deps
	$(PY) -m pytest -q -m slow || [ $$? -eq 5 ]  # 5 = no slow tests collected

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check monitor drivers alarms config simulators scripts tests bench
	$(VENV)/bin/mypy

bench: $(TEST_STAMP) test-deps bench-deps
	$(PY) bench/run_all.py

clean:
	rm -rf var build *.egg-info .pytest_cache .mypy_cache .ruff_cache
