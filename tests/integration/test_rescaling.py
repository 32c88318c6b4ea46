"""Rescaling a streaming job from a savepoint on a real cluster (docs/streaming.md,
"Rescaling"): a job with per-key value state stopped with a savepoint at parallelism 2,
resumed at 3, stopped again and resumed at 1; its committed output is exactly once, and
every key's state went where its key group did (a key whose state was lost or doubled
would number its records twice)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from clusterdeck.core.protocol.checkpoints import SavepointRestore
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_failover import described
from tests.integration.test_streaming import committed
from tests.waiting import wait_for

# A streaming job holds a slot per subtask of each vertex: 2 x 3 at parallelism 3. Nothing
# is killed here: the default heartbeats, not the quick ones that take a TaskManager on a
# loaded machine as lost.
pytestmark = [pytest.mark.integration,
              pytest.mark.cluster({**SPARK_UP_AND_RESTARTS, "taskmanager.count": 3,
                                   "heartbeat.interval": 1.0, "heartbeat.timeout": 10.0,
                                   "rpc.ask-timeout": 30.0})]

KEYS = 40
NUMBERED_JOB = f'''
def numbered(record, state):
    """Each record of a key numbered from 1, in the key's value state."""
    seen = (state.value() or 0) + 1
    state.update(seen)
    return [f"{{record[0]}},{{state.key}},{{seen}}"]


def build(env):
    env.enable_checkpointing(0.3)
    (env.rate_source(float(env.args[2]), int(env.args[1]))
        .key_by(lambda record: record[0] % {KEYS})
        .process(numbered)
        .write_text(env.args[0]))
'''


def check_exactly_once(lines: list[str], count: int | None) -> None:
    """Every index once (all of ``range(count)``); each key's records numbered 1..n, each
    number once."""
    indices, numbers = [], defaultdict(list)
    for line in lines:
        index, key, seen = map(int, line.split(","))
        assert key == index % KEYS
        indices.append(index)
        numbers[key].append(seen)
    assert len(set(indices)) == len(indices)
    if count is not None:
        assert sorted(indices) == list(range(count))
    for key, seen in numbers.items():
        assert sorted(seen) == list(range(1, len(seen) + 1)), f"key {key}: {sorted(seen)}"


def stop_with_savepoint(client, job_id: str, out: Path, lines: int,
                        timeout: float = 60) -> str:
    def ended() -> bool:
        snapshot = client.snapshot(job_id, 1.0)
        return snapshot is not None and snapshot.graph.status.is_terminal

    wait_for(lambda: len(committed(out)) >= lines or ended(), timeout,
             f"{lines} lines committed")
    assert not ended(), described(wait_result(client, job_id, 10))
    stopped = client.savepoint(job_id, stop=True, timeout=60)
    result = wait_result(client, job_id, 60)
    assert result.status == JobStatus.FINISHED, described(result)
    return stopped.path


@pytest.mark.timeout(480)  # three jobs, each restoring and starting its Spark tasks
def test_a_keyed_job_rescaled_from_2_to_3_to_1_subtasks_writes_exactly_once(
        client, tmp_path) -> None:
    """The first two runs' source has no end in sight (it must not end before its stop,
    however long Spark takes to start); the last one ends a little after the indices the
    others reached, so that its output is all of ``range(count)``."""
    job, out = tmp_path / "numbered.py", tmp_path / "out"
    job.write_text(NUMBERED_JOB)
    endless = (str(out), "1000000", "250")
    first = client.submit(job, endless, parallelism=2)
    savepoint = stop_with_savepoint(client, first, out, 300, 180)  # Spark starts first
    assert not list(out.glob("part-2-*"))

    wider = client.submit(job, endless, parallelism=3, savepoint=SavepointRestore(savepoint))
    savepoint = stop_with_savepoint(client, wider, out, len(committed(out)) + 300, 120)
    assert list(out.glob("part-2-*"))  # the third subtask wrote
    check_exactly_once(committed(out), None)  # no index twice, every key numbered on

    count = max(int(line.split(",")[0]) for line in committed(out)) + 500
    narrower = client.submit(job, (str(out), str(count), "250"), parallelism=1,
                             savepoint=SavepointRestore(savepoint))
    result = wait_result(client, narrower, 90)
    assert result.status == JobStatus.FINISHED, described(result)
    check_exactly_once(committed(out), count)
