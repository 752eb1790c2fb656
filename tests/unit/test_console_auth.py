"""Console users file, password hashes, sessions, login rate limiting and the role rules (no server)."""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import pytest

from config.loader import load_config
from monitor import cli
from monitor.console.auth import LoginLimiter, Sessions, may_act, may_see, visible_sites
from monitor.console.users import (
    Role,
    User,
    UsersError,
    UserStore,
    hash_password,
    load_users,
    save_users,
    verify_password,
)
from tests.browser.harness import ACME, BOLT, write_site


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_scrypt_hashes_verify_and_differ_by_salt() -> None:
    a, b = hash_password("s3cret pass"), hash_password("s3cret pass")
    assert a != b and a.startswith("scrypt$16384$8$1$")
    assert verify_password("s3cret pass", a) and not verify_password("s3cret pasS", a)
    assert not verify_password("x", "scrypt$bad") and not verify_password("x", "md5$1$2$3$4$5")


def test_users_file_round_trip_is_private_and_escapes(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    odd = User(name="o.brien@x", role=Role.INDUSTRY, company='Quote "Co" \\ Ltd', hash=hash_password("pw123456"))
    save_users(path, {odd.name: odd})
    assert load_users(path) == {odd.name: odd}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "pw123456" not in path.read_text()


@pytest.mark.parametrize(("text", "message"), [
    ('[[user]]\nname = "a b"\nrole = "operator"\nhash = "scrypt$x"\n', "not a user name"),
    ('[[user]]\nname = "a"\nrole = "admin"\nhash = "scrypt$x"\n', "expected operator, industry or enforcement"),
    ('[[user]]\nname = "a"\nrole = "industry"\nhash = "scrypt$x"\n', "needs the company"),
    ('[[user]]\nname = "a"\nrole = "operator"\nhash = "plain"\n', "scrypt hash"),
    ('[[user]]\nname = "a"\nrole = "operator"\nhash = "scrypt$x"\n' * 2, "appears twice"),
    ('[[user]]\nname = "a"\nrole = "operator"\nhash = "scrypt$x"\npassword = "p"\n', "expected only"),
])
def test_a_bad_users_file_is_refused_with_the_entry_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "users.toml"
    path.write_text(text)
    with pytest.raises(UsersError, match="user\\[") as exc:
        load_users(path)
    assert message in str(exc.value)


def test_user_store_follows_the_file_and_costs_the_same_for_unknown_names(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    store = UserStore(path=path)
    assert store.get("op") is None and store.authenticate("op", "whatever1") is None
    save_users(path, {"op": User(name="op", role=Role.OPERATOR, company="", hash=hash_password("pw-12345"))})
    assert store.authenticate("op", "pw-12345") is not None and store.authenticate("op", "nope") is None


def test_sessions_expire_and_end_when_the_user_changes() -> None:
    clock = Clock()
    sessions = Sessions(lifetime=60, clock=clock)
    user = User(name="op", role=Role.OPERATOR, company="", hash="scrypt$h")
    s = sessions.create(user)
    assert sessions.get(s.token, lambda n: user) is s
    assert s.csrf_ok(s.csrf) and not s.csrf_ok("x") and not s.csrf_ok(None)
    demoted = User(name="op", role=Role.ENFORCEMENT, company="", hash="scrypt$h")
    assert sessions.get(s.token, lambda n: demoted) is None  # role changed: the session is gone
    s2 = sessions.create(user)
    clock.t += 61
    assert sessions.get(s2.token, lambda n: user) is None
    assert sessions.get(None, lambda n: user) is None and sessions.get("forged", lambda n: user) is None


def test_login_limiter_counts_per_name_and_per_client_in_a_window() -> None:
    clock = Clock()
    lim = LoginLimiter(per_name=3, per_client=5, window=100, clock=clock)
    for _ in range(3):
        assert lim.retry_after("Op", "1.2.3.4") == 0
        lim.failed("Op", "1.2.3.4")
    assert lim.retry_after("op", "1.2.3.4") == pytest.approx(100)  # names compare case-insensitively
    assert lim.retry_after("op", "9.9.9.9") == 0  # a client that has not failed may still try the name
    assert lim.retry_after("other", "1.2.3.4") == 0
    lim.failed("b", "1.2.3.4")
    lim.failed("c", "1.2.3.4")
    assert lim.retry_after("d", "1.2.3.4") > 0  # five failures from one client
    clock.t += 10
    lim.failed("op", "9.9.9.9")  # ... but once it has failed, the name's limit holds it too
    assert lim.retry_after("op", "9.9.9.9") == pytest.approx(90)
    clock.t += 91
    assert lim.retry_after("op", "1.2.3.4") == 0
    lim.failed("op", "x")
    lim.succeeded("op")
    assert lim.retry_after("op", "x") == 0


def test_login_limiter_memory_is_bounded_and_expires() -> None:
    """Failed names used to be kept forever: a flood of distinct names grew the console without bound."""
    clock = Clock()
    lim = LoginLimiter(per_name=5, per_client=20, window=300, max_keys=1000, clock=clock)
    for i in range(30_000):
        lim.failed(f"name-{i}-" + "x" * 5000, f"10.0.{i // 250}.{i % 250}")
    assert len(lim) <= 1000
    assert all(len(q) <= 20 for q in lim._fails.values()) and all(len(k) < 100 for k in lim._fails)
    assert lim.retry_after(f"name-29999-{'x' * 5000}", "10.0.119.249") == 0  # one failure each: not limited
    clock.t += 301
    assert lim.retry_after("anyone", "10.0.0.1") == 0 and len(lim) == 0  # the window passed: all dropped


def test_role_rules(tmp_path: Path) -> None:
    config = load_config(write_site(tmp_path))
    op = User(name="op", role=Role.OPERATOR, company="", hash="")
    acme = User(name="a", role=Role.INDUSTRY, company="ACME Plating Co.", hash="")
    enf = User(name="e", role=Role.ENFORCEMENT, company="", hash="")
    assert [s.id for s in visible_sites(op, config)] == [ACME, BOLT] == [s.id for s in visible_sites(enf, config)]
    assert [s.id for s in visible_sites(acme, config)] == [ACME]
    assert may_see(acme, config, ACME) and not may_see(acme, config, BOLT)
    assert may_act(op, "reset") and may_act(acme, "seen") and not may_act(acme, "shelve")
    assert not may_act(acme, "ack") and not may_act(op, "seen")  # only the plant acknowledges plant alarms
    assert may_act(op, "comment") and may_act(acme, "comment") and not may_act(enf, "comment")
    assert not any(may_act(enf, a) for a in ("ack", "shelve", "unshelve", "reset"))
    assert not may_act(op, "out-of-service")


def test_pretreat_user_add_list_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    site = write_site(tmp_path)
    users = tmp_path / "site.users.toml"
    monkeypatch.setattr(sys, "stdin", io.StringIO("long enough pw\n"))
    assert cli.main(["user", "add", "--config", str(site), "--name", "acme1", "--role", "industry",
                     "--company", "ACME Plating Co.", "--password-stdin"]) == 0
    assert verify_password("long enough pw", load_users(users)["acme1"].hash)
    monkeypatch.setattr(sys, "stdin", io.StringIO("long enough pw\n"))
    assert cli.main(["user", "add", "--config", str(site), "--name", "x", "--role", "industry",
                     "--company", "Nobody Inc.", "--password-stdin"]) == 2
    assert "ACME Plating Co., Bolt Works Inc." in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.StringIO("short\n"))
    assert cli.main(["user", "add", "--config", str(site), "--name", "y", "--role", "operator",
                     "--password-stdin"]) == 2
    monkeypatch.setattr(sys, "stdin", io.StringIO("long enough pw\n"))
    assert cli.main(["user", "add", "--config", str(site), "--name", "acme1", "--role", "operator",
                     "--password-stdin"]) == 2  # exists: --replace needed
    capsys.readouterr()
    assert cli.main(["user", "list", "--config", str(site)]) == 0
    assert capsys.readouterr().out == "acme1\tindustry\tACME Plating Co.\n"
    assert cli.main(["user", "remove", "--config", str(site), "--name", "acme1"]) == 0
    assert load_users(users) == {}
