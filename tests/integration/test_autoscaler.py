"""The autoscaler on a real cluster (docs/elastic.md, "Autoscaler"): a keyed streaming job
whose keyed vertex is made slow on purpose (it sleeps per record while a file exists) is
raised from its busy time and its source's backpressure; once the file is removed and
the load drops, it is lowered again; both decisions are in the job's chain of causes with
their reasons, and the committed output is exactly once across both rescales."""

from __future__ import annotations

import re

import pytest

from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_failover import described
from tests.integration.test_reactive import rescales, widths
from tests.integration.test_rescaling import KEYS, check_exactly_once
from tests.integration.test_streaming import committed
from tests.waiting import wait_for

# One TaskManager of four slots: the job's two vertices (rate source; keyed process and
# file sink) start at 1, so a raise may take the keyed vertex to 3. Short window and
# cooldown, so that the test decides within seconds.
pytestmark = [pytest.mark.integration,
              pytest.mark.cluster({**SPARK_UP_AND_RESTARTS, "taskmanager.count": 1,
                                   "taskmanager.slots": 4, "autoscaler.enabled": True,
                                   "autoscaler.window": 4.0, "autoscaler.cooldown": 4.0,
                                   "autoscaler.stabilization": 3.0,
                                   "rpc.ask-timeout": 30.0})]

# numbered(): test_rescaling's job, sleeping 30 ms a record while the file SLOW exists:
# at 50 records a second the keyed vertex needs one and a half subtasks.
SLOW_JOB = f'''
import os
import time

SLOW = "{{slow}}"


def numbered(record, state):
    if os.path.exists(SLOW):
        time.sleep(0.03)
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


@pytest.mark.timeout(300)
def test_a_slow_vertex_is_raised_and_lowered_again_when_its_load_drops(
        cluster, client, tmp_path) -> None:
    job, out, slow = tmp_path / "slow.py", tmp_path / "out", tmp_path / "slow"
    job.write_text(SLOW_JOB.replace("{slow}", str(slow)))
    slow.write_text("sleep per record while this file exists\n")
    job_id = client.submit(job, (str(out), "1000000", "50"), parallelism=1)

    wait_for(lambda: any(" raised 1 → " in s for s in rescales(client, job_id)), 120,
             "the slow vertex raised")
    raised = widths(client, job_id)
    assert raised[0] == 1 and raised[1] > 1, raised  # the source keeps its parallelism
    decision = rescales(client, job_id)[0]
    assert decision.startswith("parallelism of process -> write_text raised 1 → ") \
        and "busy " in decision, decision
    before = len(committed(out))
    wait_for(lambda: len(committed(out)) >= before + 50, 90, "output at the raised width")

    slow.unlink()  # the load drops
    wait_for(lambda: any(" lowered " in s for s in rescales(client, job_id)), 90,
             "the idle vertex lowered")
    lowered = rescales(client, job_id)[-1]
    decided = re.match(r"parallelism of process -> write_text lowered (\d+) → (\d+): "
                       r"busy \d+% over 4 s", lowered)
    assert decided and int(decided[2]) < int(decided[1]), lowered
    assert widths(client, job_id) == (1, int(decided[2]))
    before = len(committed(out))
    wait_for(lambda: len(committed(out)) >= before + 50, 90, "output at the lowered width")

    client.cancel(job_id)
    result = wait_result(client, job_id, 60)
    assert result.status == JobStatus.CANCELED, described(result)
    check_exactly_once(committed(out), None)
