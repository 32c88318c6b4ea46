"""A soak on a real cluster: hundreds of tiny jobs, several in flight at once, with a burst
of a thousand TaskManager registrations among them. Afterwards every job has finished, the
cluster takes the next one, ``clusterdeck list`` answers with no more jobs than retention
keeps, and the JobManager has not grown with the jobs: memory, threads, open files.

Marked slow, but CI runs it: one to two minutes on two cores. The jobs are the smallest
that still go the whole way (upload, store, JobMaster, slot, Spark, collected rows,
result), and a small ``jobstore.retention.max-jobs`` makes retention delete jobs all
through the soak.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.client.jobclient import JobClient
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from tests.integration.clusters import ClusterWatcher, running_cluster, wait_result
from tests.integration.test_bounded import register_probes
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEPT = 150  # jobstore.retention.max-jobs: from the 151st ended job on, each end deletes one
WARM_UP = 40  # jobs before the first measurement: Spark, imports and caches settle first
SOAK = 260  # jobs after it; retention deletes 150 of the 300 along the way
IN_FLIGHT = 8  # twice the cluster's slots: a job always waits for a slot
PROBES = 1000  # raw registrations, sent once a third of the soak's jobs have ended
JOB_TIMEOUT = 120.0  # one tiny job, waiting behind the others for a slot
LIST_TIMEOUT = 60.0  # the CLI itself gives up after 5 s to connect plus one ask per page
# What the JobManager's RSS may grow from the warm-up to the end. Measured here: 2-5 MiB:
# the registrations and the store filling up to KEPT (8-12 KiB per kept job; an upload's
# timer no longer holds its bytes, see docs/benchmarks.md, the soak). The bound leaves
# room for the
# allocator's arenas, which CPython seldom returns, under a loaded CI machine; a leak of
# whole jobs (a JobMaster, its ExecutionGraph, the artifact) at 100 KiB or more a job
# crosses it. Smaller leaks show in the thread and file counts below or not at all:
# this test is about staying bounded, not about bytes.
RSS_GROWTH = 32 * 1024 * 1024
# Threads and open files may differ from the warm-up by what is in passing: a JobMaster
# being stopped, a retention worker, a log file rotating.
THREADS_SLACK, FILES_SLACK = 16, 16

TINY_JOB = """\
def build(env):
    env.set_job_name("tiny")
    env.from_range(0, 3).collect(name="rows")
"""


@dataclass(frozen=True)
class Usage:
    """The JobManager process as the kernel sees it."""

    pid: int
    rss: int
    threads: int
    files: int


@dataclass
class Soak:
    cluster: LocalCluster
    watcher: ClusterWatcher
    client: JobClient
    job_file: Path
    after_warm_up: Usage
    results: list[p.JobResult]
    answers: list[object]
    newest_job: str


def jobmanager_usage(cluster: LocalCluster) -> Usage:
    pid = cluster.supervisor.info("jobmanager").pid
    assert pid is not None, "the JobManager is not running"
    process = psutil.Process(pid)
    return Usage(pid, process.memory_info().rss, process.num_threads(), process.num_fds())


def submit_and_wait(client: JobClient, job_file: Path) -> tuple[str, p.JobResult]:
    """Pool thread: one job from its submission to its result."""
    job_id = client.submit(job_file)
    return job_id, wait_result(client, job_id, JOB_TIMEOUT)


@contextmanager
def jobs_in_flight(client: JobClient, job_file: Path,
                   count: int) -> Iterator[list[Future[tuple[str, p.JobResult]]]]:
    """``count`` jobs, IN_FLIGHT at a time, each on a pool thread; on the way out the jobs
    not yet started are dropped, so a failure does not leave hundreds queued."""
    pool = ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="soak")
    try:
        yield [pool.submit(submit_and_wait, client, job_file) for _ in range(count)]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def ended(futures: list[Future], count: int) -> None:
    # Each job may wait behind all those in flight before it; none waits on a fixed sleep.
    wait_for(lambda: sum(f.done() for f in futures) >= count,
             JOB_TIMEOUT + count * 2.0, f"{count} of {len(futures)} jobs ended", 0.1)


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soak]:
    job_file = tmp_path_factory.mktemp("soak") / "tiny.py"
    job_file.write_text(TINY_JOB)
    with running_cluster("auto", **{
            "cluster.id": f"test-soak-{uuid.uuid4().hex[:6]}",
            "jobstore.retention.max-jobs": KEPT,
            "restart-strategy.fixed-delay.delay": 0.2}) as (cluster, watcher), \
            JobClient(cluster.config, connect_timeout=30) as client:
        with jobs_in_flight(client, job_file, WARM_UP) as warm_up:
            ended(warm_up, WARM_UP)
        assert all(f.result()[1].status == JobStatus.FINISHED for f in warm_up)
        after_warm_up = jobmanager_usage(cluster)
        # The registrations go in while the soak's jobs run and wait for slots.
        with jobs_in_flight(client, job_file, SOAK) as soaked:
            ended(soaked, SOAK // 3)
            # None of the probes ever heartbeats: each is lost soon after it registered.
            answers = register_probes(cluster.config, PROBES)
            ended(soaked, SOAK)
        outcomes = [f.result() for f in soaked]
        yield Soak(cluster, watcher, client, job_file, after_warm_up,
                   [result for _, result in outcomes], answers, outcomes[-1][0])


def test_every_job_of_the_soak_finished(soak: Soak) -> None:
    assert len(soak.results) == SOAK
    failed = [r for r in soak.results if r.status != JobStatus.FINISHED]
    assert not failed, f"{len(failed)} jobs did not finish, e.g. {failed[0].root_cause}"


def test_every_registration_was_answered_and_every_probe_is_lost(soak: Soak) -> None:
    assert len(soak.answers) == PROBES
    assert all(isinstance(a, p.AcknowledgeRegistration | p.RefuseRegistration)
               for a in soak.answers)
    wait_for(lambda: (o := soak.watcher.latest) is not None and not any(
        t.id.startswith("probe-") and t.state is p.TaskManagerState.REGISTERED
        for t in o.taskmanagers), 60, "every probe lost")
    assert soak.watcher.registered() == ["taskmanager-1", "taskmanager-2"]


def test_the_cluster_takes_a_job_after_the_soak(soak: Soak) -> None:
    result = wait_result(soak.client, soak.client.submit(soak.job_file), JOB_TIMEOUT)
    assert result.status == JobStatus.FINISHED, result.root_cause


def test_list_answers_with_no_more_jobs_than_retention_keeps(soak: Soak) -> None:
    started = time.monotonic()
    listing = subprocess.run([sys.executable, "-m", "clusterdeck.core.cli", "list",
                              "--cluster", soak.cluster.cluster_id, "--json"],
                             capture_output=True, text=True, timeout=LIST_TIMEOUT)
    assert listing.returncode == 0, listing.stderr
    jobs = json.loads(listing.stdout)
    running = sum(1 for job in jobs if not JobStatus(job["status"]).is_terminal)
    assert 0 < len(jobs) <= KEPT + running
    assert soak.newest_job in {job["job_id"] for job in jobs}
    assert time.monotonic() - started < LIST_TIMEOUT


def test_the_jobmanager_did_not_grow_with_the_jobs(soak: Soak) -> None:
    before, after = soak.after_warm_up, jobmanager_usage(soak.cluster)
    assert after.pid == before.pid, "the JobManager restarted: its memory says nothing"
    growth = after.rss - before.rss
    assert growth < RSS_GROWTH, (f"the JobManager's RSS grew by {growth / 2**20:.1f} MiB "
                                 f"over {SOAK} jobs and {PROBES} registrations")
    assert after.threads <= before.threads + THREADS_SLACK
    assert after.files <= before.files + FILES_SLACK
