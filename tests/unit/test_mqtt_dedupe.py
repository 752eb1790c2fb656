"""`RecentMessages`: an exact copy of a recent timestamped message is a repeat; nothing else is."""

from __future__ import annotations

from drivers.mqtt.dedupe import RecentMessages


def test_only_an_exact_copy_on_the_same_topic_is_a_repeat() -> None:
    r = RecentMessages()
    assert not r.repeat("acme/lel", b'{"t": 1, "v": 2}')
    assert r.repeat("acme/lel", b'{"t": 1, "v": 2}')
    assert not r.repeat("acme/lel2", b'{"t": 1, "v": 2}')  # same bytes, another instrument's topic
    assert not r.repeat("acme/lel", b'{"t": 1, "v": 3}')
    # where the payload ends and the topic begins is part of the key: these two are different messages
    assert not r.repeat("b", b"xa/") and not r.repeat("a/b", b"x")


def test_memory_is_bounded_to_the_last_size_messages() -> None:
    r = RecentMessages(size=3)
    for i in range(5):
        assert not r.repeat("t", str(i).encode())
    assert len(r._seen) == 3
    assert r.repeat("t", b"4") and r.repeat("t", b"2")  # still remembered
    assert not r.repeat("t", b"0")  # forgotten: long past any redelivery window
