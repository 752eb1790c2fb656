"""The [influx] table: defaults, every mistake reported with its key path, and token handling."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from config.influx import AuthScheme, InfluxSettings, TokenError, default_queue_path, parse_influx
from config.reader import Reader


def parse(text: str, base: Path, historian: Path | None = None) -> tuple[InfluxSettings | None, list[str]]:
    reader = Reader("site.toml")
    settings = parse_influx(tomllib.loads(text), reader, base, historian=historian)
    return settings, [f"{e.path}: {e.expected}" for e in reader.errors]


def test_absent_table_means_disabled(tmp_path: Path) -> None:
    assert parse("[daemon]\n", tmp_path) == (None, [])


def test_minimal_table_gets_documented_defaults(tmp_path: Path) -> None:
    s, errors = parse('[influx]\nurl = "http://127.0.0.1:8086/"\nbucket = "b"\n', tmp_path,
                      historian=tmp_path / "var" / "pretreat.sqlite")
    assert errors == []
    assert s == InfluxSettings(url="http://127.0.0.1:8086", bucket="b",
                               queue_path=tmp_path / "var" / "pretreat.influx-queue.sqlite")
    assert s.batch_size == 5000 and s.flush_interval == 1.0 and s.verify_tls is True
    assert s.auth_scheme is AuthScheme.TOKEN and s.budget_bytes == 1024 * 1024 * 1024
    assert s.read_token() == ""


def test_full_table_with_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "influx.token").write_text("s3cr3t-token\n")
    s, errors = parse("""
[influx]
url = "https://influx.example.org:8086"
org = "utility"
bucket = "pretreatment"
token_file = "secrets/influx.token"
auth_scheme = "basic"
verify_tls = false
batch_size = 1000
flush_interval = 0.5
timeout = 5
max_backoff = 10
queue_path = "q/influx.sqlite"
disk_budget_mb = 64
alarm_threshold_pct = 90
""", tmp_path)
    assert errors == []
    assert s is not None
    assert s.token_file == tmp_path / "secrets" / "influx.token"
    assert s.queue_path == tmp_path / "q" / "influx.sqlite"
    assert (s.auth_scheme, s.verify_tls) == (AuthScheme.BASIC, False)
    assert (s.batch_size, s.disk_budget_mb) == (1000, 64)
    assert s.read_token() == "s3cr3t-token"
    assert "s3cr3t" not in repr(s)  # the token is never part of the settings


def test_every_mistake_is_reported_with_its_key_path(tmp_path: Path) -> None:
    _, errors = parse("""
[influx]
url = "influx.example.org"
bucket = ""
token_file = "missing.token"
token_credential = "bad name!"
auth_scheme = "bearer"
verify_tls = "yes"
batch_size = 0
flush_interval = -1
disk_budget_mb = 0
alarm_threshold_pct = 150
colour = "blue"
""", tmp_path)
    paths = sorted(e.split(":")[0] for e in errors)
    assert paths == sorted([
        "influx.url", "influx.bucket", "influx.token_file", "influx.token_credential",
        "influx.auth_scheme", "influx.verify_tls", "influx.batch_size", "influx.flush_interval",
        "influx.disk_budget_mb", "influx.alarm_threshold_pct", "influx.colour",
    ])


def test_token_file_and_credential_are_exclusive(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("x")
    _, errors = parse('[influx]\nurl = "http://h"\nbucket = "b"\ntoken_file = "t"\ntoken_credential = "c"\n',
                      tmp_path)
    assert errors == ["influx.token_credential: either token_file or token_credential, not both"]


def test_token_from_systemd_credentials_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s, _ = parse('[influx]\nurl = "http://h"\nbucket = "b"\ntoken_credential = "influx-token"\n', tmp_path)
    assert s is not None
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    with pytest.raises(TokenError, match="CREDENTIALS_DIRECTORY is not set"):
        s.read_token()
    creds = tmp_path / "creds"
    creds.mkdir()
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    with pytest.raises(TokenError, match="cannot read") as err:
        s.read_token()
    (creds / "influx-token").write_text("from-systemd\n")
    assert s.read_token() == "from-systemd"
    assert "from-systemd" not in str(err.value)


def test_unreadable_or_multiline_token_is_a_clear_error_without_the_secret(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text("line-one-secret\nline-two\n")
    s = InfluxSettings(url="http://h", bucket="b", queue_path=tmp_path / "q", token_file=token)
    with pytest.raises(TokenError, match="exactly one non-empty line") as err:
        s.read_token()
    assert "secret" not in str(err.value)


def test_default_queue_path_sits_next_to_the_historian() -> None:
    assert default_queue_path(Path("/var/lib/pretreat/pretreat.sqlite")) == \
        Path("/var/lib/pretreat/pretreat.influx-queue.sqlite")
