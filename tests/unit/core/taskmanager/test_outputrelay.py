"""What running scripts print, handed on to their JobMasters
(core/taskmanager/outputrelay.py)."""

from __future__ import annotations

from types import SimpleNamespace

from clusterdeck.core.engine.liveoutput import LiveOutput
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.taskmanager.attemptlogs import AttemptLogHandler
from clusterdeck.core.taskmanager.outputrelay import (
    OUTPUT_INTERVAL,
    OUTPUT_PIECES_PER_TICK,
    OutputRelay,
)
from tests.unit.core.taskmanager.helpers import FakeEndpoint, deployment


def chatty_task() -> SimpleNamespace:
    """A task that printed twice as much as one tick hands on."""
    live = LiveOutput()
    live.write("stdout", "x" * p.OUTPUT_PIECE * OUTPUT_PIECES_PER_TICK * 2)
    task = deployment()
    return SimpleNamespace(deployment=task, attempt_id=task.attempt_id, live=live)


def sent(endpoint: FakeEndpoint) -> list[p.TaskOutput]:
    pieces = [message for _name, message, _ in endpoint.rpc_service.calls()]
    endpoint.rpc_service.gateways.clear()
    return pieces


def test_a_tick_hands_on_a_bounded_share_and_the_end_hands_on_the_rest(tmp_path) -> None:
    endpoint, task = FakeEndpoint(), chatty_task()
    running = [task]
    relay = OutputRelay(endpoint, AttemptLogHandler(tmp_path), lambda: running)
    relay.tick_soon()
    relay.tick_soon()  # one chain of ticks

    assert endpoint.fire_timers() == [OUTPUT_INTERVAL]
    first = sent(endpoint)
    assert len(first) == OUTPUT_PIECES_PER_TICK
    assert first[0].path == "/work/output/job_v-0_a0.stdout"

    running.clear()
    relay.last_of(task)  # type: ignore[arg-type]
    assert len(sent(endpoint)) == OUTPUT_PIECES_PER_TICK
    endpoint.fire_timers()
    assert endpoint.timers == []  # no task runs: the ticks stop
