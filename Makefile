# pretreat-monitor: `make demo` and `make test` are the two commands a newcomer needs.
# Both create the virtualenv and install what they need (Debian packages too, when run as root).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test test-fast test-slow lint bench system-deps clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

# Debian packages the demo and the real-server tests use: mosquitto, socat, victoria-metrics, poppler-utils
# (pdftoppm renders report pages), chromium (console browser tests), openssl (test certificates), strace (the systemd
# unit's system-call filter, emulated in a test).
system-deps:
	@missing=""; \
	command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || missing="$$missing mosquitto"; \
	command -v socat >/dev/null || missing="$$missing socat"; \
	command -v victoria-metrics >/dev/null || missing="$$missing victoria-metrics"; \
	command -v pdftoppm >/dev/null || missing="$$missing poppler-utils"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v strace >/dev/null || missing="$$missing strace"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: $(STAMP) system-deps
	@bash scripts/demo.sh

# The fast suite (what developers run); CI runs it and then the slow one.
test: $(STAMP) system-deps lint
	$(PY) -m pytest -q -m "not slow"

test-slow: $(STAMP) system-deps
	$(PY) -m pytest -q -m slow || [ $$? -eq 5 ]  # 5 = no slow tests collected

lint: $(STAMP)
	$(VENV)/bin/ruff check monitor drivers alarms config simulators tests bench
	$(VENV)/bin/mypy

bench: $(STAMP) system-deps
	$(PY) bench/run_all.py

clean:
	rm -rf var build *.egg-info .pytest_cache .mypy_cache .ruff_cache
