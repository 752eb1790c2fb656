"""Capped, jittered exponential backoff: the one policy of every reconnect and retry loop (the MQTT driver,
alarm delivery, the InfluxDB sink and backfill).

Why jitter: after a broker restart every instrument client of every site reconnects at once; spreading the
attempts keeps them from arriving as one burst. Why "stable_after": a broker that accepts the connection
and drops it at once (a second daemon using the same client id, an ACL that kicks the client) would
otherwise be hammered at the initial delay forever, so a session only resets the backoff once it has lasted.
`Retries` counts one loop's consecutive failures under a policy and honours a server's own hint (HTTP
Retry-After).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before reconnect attempt number ``failures + 1``; all durations in seconds.

    The delay is ``min(maximum, initial * factor ** failures)`` shortened by a random fraction of at most
    ``jitter`` ("equal jitter" for jitter = 0.5): with the defaults the first retry waits 0.25–0.5 s,
    then 0.5–1 s, 1–2 s, … up to 15–30 s.
    """

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5
    stable_after: float = 10.0  # a session that lasted this long resets the failure count

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.maximum and self.factor >= 1 and 0 <= self.jitter < 1
                and self.stable_after >= 0):
            raise ValueError(f"inconsistent backoff {self}")

    def delay(self, failures: int, *, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after ``failures`` consecutive failures (0 = the first retry after a loss)."""
        exponent = min(max(failures, 0), 64)  # 2**64 × initial is far past any cap; avoids float overflow
        base = min(self.maximum, self.initial * self.factor**exponent)
        return base * (1.0 - self.jitter * rand())


class Retries:
    """One loop's consecutive failures and the delay before its next attempt, under ``policy``."""

    def __init__(self, policy: Backoff, *, rand: Callable[[], float] = random.random) -> None:
        self.policy, self.rand, self.failures = policy, rand, 0

    def next(self, hint: float | None = None) -> float:
        """Seconds to wait now; a server's ``hint`` (Retry-After) is honoured up to the policy's maximum."""
        delay = self.policy.delay(self.failures, rand=self.rand)
        self.failures += 1
        return max(delay, min(hint, self.policy.maximum)) if hint else delay

    def reset(self) -> None:
        self.failures = 0


def retries(maximum: float, *, initial: float = 0.25, rand: Callable[[], float] = random.random) -> Retries:
    """Equal jitter (each delay in [d/2, d]) doubling from ``initial`` up to ``maximum`` seconds."""
    return Retries(Backoff(initial=min(initial, maximum), maximum=maximum, jitter=0.5, stable_after=0.0), rand=rand)
