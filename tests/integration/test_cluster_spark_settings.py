"""Cluster-wide Spark properties on a real local cluster: set once in the configuration,
seen by a PySpark script on every TaskManager."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import running_cluster, wait_result

pytestmark = pytest.mark.integration

# Holds its TaskManager's only slot until the other script holds the other one, so that
# the two run at once and therefore on the two TaskManagers.
RENDEZVOUS_SCRIPT = """\
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
meeting, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(meeting / me).touch()
deadline = time.monotonic() + 240
while not (meeting / other).exists():
    if time.monotonic() > deadline:
        sys.exit(f"{other} never ran while {me} did")
    time.sleep(0.05)
print("app", spark.sparkContext.appName)
print("probe", spark.conf.get("spark.clusterdeck.probe"))
print("partitions", spark.conf.get("spark.sql.shuffle.partitions"))
print("context probe", spark.sparkContext.getConf().get("spark.clusterdeck.probe"))
"""


def printed(result: p.JobResult) -> dict[str, str]:
    lines = (line.rpartition(" ") for line in result.stdout.splitlines())
    return {name: value for name, _, value in lines}


def test_a_cluster_wide_spark_property_reaches_the_script_on_every_taskmanager(
        tmp_path) -> None:
    script = tmp_path / "probe.py"
    script.write_text(RENDEZVOUS_SCRIPT)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    spark_properties = {"spark.clusterdeck.probe": "hello", "spark.sql.shuffle.partitions": 7}
    with (running_cluster("auto", **{"taskmanager.slots": 1, **spark_properties})
          as (cluster, _), JobClient(cluster.config, connect_timeout=30) as client):
        results = both_results(client, script, meeting)
    for result in results:
        assert result.status == JobStatus.FINISHED, (result.root_cause or {}).get("message")
    seen = [printed(result) for result in results]
    assert sorted(lines["app"] for lines in seen) == ["clusterdeck-taskmanager-1",
                                                      "clusterdeck-taskmanager-2"]
    for lines in seen:
        assert lines["probe"] == lines["context probe"] == "hello"
        assert lines["partitions"] == "7"


def both_results(client: JobClient, script: Path, meeting: Path) -> list[p.JobResult]:
    """Submits the two halves of the rendezvous, then waits for each: neither finishes
    before the other has started, whichever is waited for first."""
    no_restart = {"restart-strategy.type": "none"}
    jobs = [client.submit(script, [str(meeting), me, other], restart_strategy=no_restart)
            for me, other in (("first", "second"), ("second", "first"))]
    return [wait_result(client, job, 300) for job in jobs]
