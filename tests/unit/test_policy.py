"""Supervision policy as data: backoff doubling with jitter and a cap, per-server overrides."""
import random

from actors.settings.config import PolicySpec, ServerConfig
from actors.supervision.policy import Policy


def test_backoff_doubles_from_the_minimum_to_the_cap_within_the_jitter():
    policy = Policy(min_backoff=0.5, max_backoff=4.0, jitter=0.2)
    rng = random.Random(7)
    for attempt, base in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)):
        delay = policy.backoff(attempt, rng)
        assert base * 0.8 <= delay <= base * 1.2, (attempt, delay)
    assert Policy(jitter=0.0, min_backoff=0.5).backoff(1) == 0.5


def test_a_servers_restart_settings_override_only_what_they_set():
    base = Policy(intensity=5, period=60.0, min_backoff=0.5, max_backoff=30.0)
    server = ServerConfig("s", "stdio", policy=PolicySpec(intensity=2, min_backoff=0.05))
    mine = base.overridden(server)
    assert (mine.intensity, mine.period, mine.min_backoff, mine.max_backoff) == (2, 60.0, 0.05, 30.0)
    assert base.overridden(ServerConfig("t", "stdio")) is base
