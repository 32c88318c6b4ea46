"""RestartPolicy and RestartBudget: pure, with a clock the test moves by hand."""

import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.supervisor import RestartPolicy
from clusterdeck.core.supervisor._policy import RestartBudget


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def budget(clock: FakeClock, **numbers: float) -> RestartBudget:
    policy = RestartPolicy(**{"max_restarts": 3, "window": 60.0, "backoff": 0.5,
                              "max_backoff": 10.0, **numbers})
    return RestartBudget(policy, clock)


def test_from_config_reads_the_supervisor_keys():
    config = Config({"supervisor.max-restarts": 7, "supervisor.restart-window": "2 min",
                     "supervisor.restart-backoff": "250 ms", "supervisor.max-backoff": "4 s"})

    assert RestartPolicy.from_config(config) == RestartPolicy(
        max_restarts=7, window=120.0, backoff=0.25, max_backoff=4.0)


def test_the_first_restart_waits_the_initial_backoff(clock):
    assert budget(clock).next_restart() == 0.5


def test_the_backoff_doubles_with_each_restart_in_the_window(clock):
    restarts = budget(clock, max_restarts=5)

    assert [restarts.next_restart() for _ in range(4)] == [0.5, 1.0, 2.0, 4.0]


def test_the_backoff_never_exceeds_the_maximum(clock):
    restarts = budget(clock, max_restarts=10, max_backoff=3.0)

    assert [restarts.next_restart() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_one_restart_more_than_allowed_within_the_window_gives_up(clock):
    restarts = budget(clock, max_restarts=3)
    granted = [restarts.next_restart() for _ in range(3)]
    clock.now += 59.0

    assert None not in granted
    assert restarts.next_restart() is None


def test_restarts_older_than_the_window_are_forgotten(clock):
    restarts = budget(clock, max_restarts=3)
    for _ in range(3):
        restarts.next_restart()
    clock.now += 60.0

    assert restarts.recent_restarts == 0
    assert restarts.next_restart() == 0.5


def test_a_refused_restart_does_not_count(clock):
    restarts = budget(clock, max_restarts=1)
    restarts.next_restart()
    restarts.next_restart()

    assert restarts.recent_restarts == 1


def test_the_window_slides_one_restart_at_a_time(clock):
    restarts = budget(clock, max_restarts=2)
    restarts.next_restart()
    clock.now += 30.0
    restarts.next_restart()
    clock.now += 31.0

    assert restarts.recent_restarts == 1
    assert restarts.next_restart() == 1.0


def test_reset_forgets_every_restart(clock):
    restarts = budget(clock, max_restarts=2)
    restarts.next_restart()
    restarts.next_restart()
    restarts.reset()

    assert restarts.next_restart() == 0.5
