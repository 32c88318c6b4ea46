"""Standby JobManagers (docs/ha.md), on a real cluster with two JobManagers per mode.

``local``: the standby waits on the leader lock; ``zookeeper``: on the election of the
cluster's own ZooKeeper server. The leader is killed with SIGKILL while a job runs (a
batch job in local mode, a streaming one in zookeeper mode): a standby must lead within
the bound, the job finish with the exact result, and the ``clusterdeck submit`` that
submitted it exit 0 without anyone trying again. The takeover times are printed (run with
-s to read them).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.client.localcluster import LocalCluster
from clusterdeck.core.node import exitcodes
from clusterdeck.core.node.service import connect_service
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import TaskExecutorGateway
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.recorder.replay import RecordedEvent, replay
from clusterdeck.core.recorder.store import FILE_NAME
from clusterdeck.core.rpc import RemoteError, RpcError
from clusterdeck.core.taskmanager.taskexecutor import endpoint_id_of
from tests.integration.clusters import QUICK_RESTARTS, RunningCluster, running_cluster, wait_result
from tests.integration.netns import process_cut_from, skip_unless_network_namespaces
from tests.integration.test_failover import described
from tests.integration.test_streaming import WINDOWS, committed, staged, windows_expected
from tests.integration.test_up import clusterdeck
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

# The bounds on takeover, SIGKILL of the leader to the new leader's record seen by
# a client, with slack for a shared test machine: local has no timeout to wait out,
# zookeeper waits out ha.zookeeper.session-timeout (2 s).
TAKEOVER_BOUND = {"local": 3.0, "zookeeper": 6.0}
SLOW_SUMS = ("import time\n"
             "def build(env):\n"
             "    def slow(x):\n"
             "        with open({marks!r}, 'a') as marks:\n"
             "            marks.write(f'{{x}}\\n')\n"
             "        time.sleep(0.25)\n"
             "        return (x % 4, x)\n"
             "    (env.from_range(0, 40, parallelism=2).map(slow)\n"
             "        .key_by(0).reduce(lambda a, b: (a[0], a[1] + b[1])).collect())\n")
EXPECTED_SUMS = {key: sum(x for x in range(40) if x % 4 == key) for key in range(4)}


@pytest.fixture(scope="module", params=["local", "zookeeper"])
def cluster(request: pytest.FixtureRequest) -> Iterator[RunningCluster]:
    """Two JobManagers (one leading, one standing by) and two TaskManagers; with
    zookeeper also the cluster's own ZooKeeper server. Every process, ZooKeeper's too, is
    stopped when the module's tests of that mode end, whether they passed or not."""
    with running_cluster("auto", **QUICK_RESTARTS, **{
            "ha.mode": request.param, "jobmanager.count": 2,
            "restart-strategy.fixed-delay.attempts": 5}) as running:
        yield running


def leader(client: JobClient) -> p.LeaderInfo:
    return client.leader(30)


def overview(client: JobClient) -> p.ClusterOverview | None:
    try:
        return client.cluster_overview(timeout=2.0)
    except RpcError:
        return None


def test_a_standby_takes_over_from_a_killed_leader_and_the_job_finishes_exactly(
        cluster: RunningCluster, client: JobClient, tmp_path: Path) -> None:
    """A batch job, kill -9 of the leader while it maps. In ha.mode local only: a
    takeover in ha.mode zookeeper, with every check of ``submit_through_a_takeover``, is
    the streaming test's below, and the new leader recovers a job the same way in either
    mode (only the election differs; the batch job's recovery under a zookeeper election
    is also the ZooKeeper-kill test's)."""
    local_cluster, watcher = cluster
    if local_cluster.config["ha.mode"] != "local":
        pytest.skip("the takeover in ha.mode zookeeper is the streaming test's")
    marks = tmp_path / "marks.txt"
    job_file = tmp_path / "slow_sums.py"
    job_file.write_text(SLOW_SUMS.format(marks=str(marks)))
    job_id = submit_through_a_takeover(
        cluster, client, tmp_path, [str(job_file)],
        lambda: marks.exists() and len(marks.read_text().split()) >= 4,
        "the job's first records mapped")
    result = client.result(job_id)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert dict(collected_rows(result)) == EXPECTED_SUMS
    # The killed JobManager, started again by its supervisor, stands by.
    wait_for(lambda: (o := overview(client)) and len(o.standbys) == 1, 60,
             "the restarted JobManager standing by")
    watcher.wait_registered(["taskmanager-1", "taskmanager-2"], timeout=60)


def submit_through_a_takeover(cluster: RunningCluster, client: JobClient, tmp_path: Path,
                              submit_args: list[str], started: Callable[[], object],
                              what: str) -> str:
    """``clusterdeck submit`` of a job, kill -9 of the leader once ``started()``: a standby
    leads within the bound, having won the mode's election, the recording tells the
    takeover, and the submitting command follows the new leader on its own and exits 0.
    The job's id."""
    local_cluster, _watcher = cluster
    mode = local_cluster.config["ha.mode"]
    first = wait_for(lambda: (o := overview(client)) and len(o.standbys) == 1 and o, 60,
                     "a leader with one standby")
    old = leader(client)
    assert old.ha_mode == mode and old.epoch >= 1 and first.leader_epoch == old.epoch
    jobmanagers = {local_cluster.supervisor.info(name).pid
                   for name in local_cluster.jobmanager_names()}
    assert old.pid in jobmanagers
    output = tmp_path / "submit.out"
    with output.open("wb") as sink:
        submit = subprocess.Popen(clusterdeck("submit", "--cluster", local_cluster.cluster_id,
                                              *submit_args), stdout=sink, stderr=sink)
    try:
        wait_for(started, 180, what)
        took_over = kill_the_leader(client, old, mode)
        assert submit.wait(240) == 0, output.read_text()
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait(10)
    new, serving = took_over
    assert new.pid in jobmanagers - {old.pid}
    assert serving.leader_cause.startswith(f"won the {mode} election after standing by ")
    took = wait_for(lambda: recorded_change(local_cluster, new.epoch, True), 30,
                    "the takeover in the recording")
    assert (took.pid, took.host, took.ha_mode) == (new.pid, new.host, mode)
    assert serving.standbys == () or all(str(new.pid) not in s for s in serving.standbys)
    submitted = re.search(r"job (\S+) submitted", output.read_text())
    assert submitted, output.read_text()
    return submitted.group(1)


def kill_the_leader(client: JobClient, old: p.LeaderInfo,
                    mode: str) -> tuple[p.LeaderInfo, p.ClusterOverview]:
    """SIGKILL the leader; the new leader's record and its first overview, the takeover
    times printed and bounded."""
    killed_at = time.monotonic()
    os.kill(old.pid, signal.SIGKILL)
    new = wait_for(lambda: (lead := leader(client)).epoch > old.epoch and lead, 30,
                   "a new leader")
    takeover = time.monotonic() - killed_at
    serving = wait_for(lambda: (o := overview(client)) and o.leader_epoch == new.epoch and o,
                       30, "the new leader answering status")
    serving_after = time.monotonic() - killed_at
    print(f"\nha.mode={mode}: leader record of epoch {new.epoch} after {takeover:.3f} s, "
          f"status answered after {serving_after:.3f} s")
    assert takeover < TAKEOVER_BOUND[mode], f"takeover took {takeover:.3f} s"
    return new, serving


def test_a_streaming_job_continues_exactly_once_across_a_takeover(
        cluster: RunningCluster, client: JobClient, tmp_path: Path) -> None:
    """test_streaming's keyed window count, submitted with ``clusterdeck submit``, kill -9
    of the leader once windows are committed: the takeover as the batch test checks it,
    and the new leader resumes every subtask from the last completed checkpoint, so the
    committed output is the undisturbed run's, each window once. In ha.mode zookeeper
    only: the new leader finds the job store and the checkpoints the same way in either
    mode (only the election differs), and a takeover in local mode is the batch test's
    above."""
    local_cluster, watcher = cluster
    if local_cluster.config["ha.mode"] != "zookeeper":
        pytest.skip("the resume after a takeover is the same in ha.mode local")
    out = tmp_path / "out"
    job_id = submit_through_a_takeover(
        cluster, client, tmp_path, [str(WINDOWS), "--", str(out), "6000", "500", "2"],
        lambda: len(committed(out)) >= 20, "some windows committed")
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, described(result)
    assert committed(out) == windows_expected(6000)
    assert staged(out) == []
    assert client.snapshot(job_id).graph.epoch >= 1
    wait_for(lambda: (o := overview(client)) and len(o.standbys) == 1, 60,
             "the restarted JobManager standing by")
    watcher.wait_registered(["taskmanager-1", "taskmanager-2"], timeout=60)


def test_zookeeper_killed_and_restarted_mid_job_loses_no_job(
        cluster: RunningCluster, client: JobClient, tmp_path: Path) -> None:
    """kill -9 of the cluster's ZooKeeper server while a batch job runs: the leader, its
    session suspended, steps down (exit LEADERSHIP_LOST); once the supervisor has started
    ZooKeeper again a JobManager leads at a higher epoch and the job finishes exactly."""
    local_cluster, watcher = cluster
    if local_cluster.config["ha.mode"] != "zookeeper":
        pytest.skip("only ha.mode zookeeper has a ZooKeeper to kill")
    wait_for(lambda: (o := overview(client)) and len(o.standbys) == 1, 60,
             "a leader with one standby")
    old = leader(client)
    name = next(n for n in local_cluster.jobmanager_names()
                if local_cluster.supervisor.info(n).pid == old.pid)
    marks = tmp_path / "marks.txt"
    job_file = tmp_path / "slow_sums.py"
    job_file.write_text(SLOW_SUMS.format(marks=str(marks)))
    job_id = client.submit(job_file)
    wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 4, 180,
             "the job's first records mapped")
    zookeeper = local_cluster.supervisor.info("zookeeper").pid
    assert zookeeper
    killed_at = time.monotonic()
    os.kill(zookeeper, signal.SIGKILL)
    wait_for(lambda: local_cluster.supervisor.info(name).pid != old.pid, 30,
             "the leader stepping down")
    assert local_cluster.supervisor.info(name).last_exit_code == exitcodes.LEADERSHIP_LOST
    new = wait_for(lambda: (lead := leader(client)).epoch > old.epoch and lead, 90,
                   "a leader once ZooKeeper is back")
    # The recording tells both changes with their causes.
    stepped_down = wait_for(lambda: recorded_change(local_cluster, old.epoch, False), 30,
                            "the step-down in the recording")
    assert "ZooKeeper session was" in stepped_down.cause and stepped_down.pid == old.pid
    assert "won the zookeeper election" in wait_for(
        lambda: recorded_change(local_cluster, new.epoch, True), 30,
        "the new leader in the recording").cause
    print(f"\nZooKeeper killed: a leader of epoch {new.epoch} after "
          f"{time.monotonic() - killed_at:.3f} s")
    assert local_cluster.supervisor.info("zookeeper").pid not in (None, zookeeper)
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert dict(collected_rows(result)) == EXPECTED_SUMS
    wait_for(lambda: (o := overview(client)) and o.leader_epoch == new.epoch
             and len(o.standbys) == 1, 90, "the other JobManager standing by")
    watcher.wait_registered(["taskmanager-1", "taskmanager-2"], timeout=60)


def test_a_leader_stopped_past_its_session_is_fenced_and_stands_by(
        cluster: RunningCluster, client: JobClient) -> None:
    local_cluster, _watcher = cluster
    if local_cluster.config["ha.mode"] != "zookeeper":
        pytest.skip("a stopped process keeps its flock: ha.mode local fails over on death only")
    old = leader(client)
    name = next(n for n in local_cluster.jobmanager_names()
                if local_cluster.supervisor.info(n).pid == old.pid)
    os.kill(old.pid, signal.SIGSTOP)
    try:
        new = wait_for(lambda: (lead := leader(client)).epoch > old.epoch and lead, 30,
                       "a new leader while the old one is stopped")
        # The TaskManagers follow the new leader before the stale one's orders are sent.
        wait_for(lambda: (o := overview(client)) and o.leader_epoch == new.epoch and any(
            t.id == "taskmanager-1" and t.state is p.TaskManagerState.REGISTERED
            for t in o.taskmanagers), 60, "taskmanager-1 registered with the new leader")
        stale_orders_are_refused(local_cluster, old, new)
    finally:
        os.kill(old.pid, signal.SIGCONT)
    # Resumed, the old leader finds its session gone (or the newer record) and exits to
    # stand by; the retained record stays the new leader's.
    wait_for(lambda: local_cluster.supervisor.info(name).pid != old.pid, 60,
             "the stale leader exited")
    assert local_cluster.supervisor.info(name).last_exit_code == exitcodes.LEADERSHIP_LOST
    with JobClient(local_cluster.config, connect_timeout=30) as late:
        assert leader(late).epoch == new.epoch
    wait_for(lambda: (o := overview(client)) and o.leader_epoch == new.epoch
             and len(o.standbys) == 1, 60, "the stale leader standing by")


def test_a_leader_cut_off_from_zookeeper_and_its_broker_is_replaced_and_runs_no_job_twice(
        cluster: RunningCluster, client: JobClient, tmp_path: Path) -> None:
    """The leader's connections to ZooKeeper and to the broker dropped silently while its
    batch job maps, and no new one to ZooKeeper let through (issue 38's partition; its
    reconnect to the broker is let through: here the standby's first connection to it,
    as it starts to lead, could not be told from the cut one's). The leader steps down as
    soon as its session is suspended, before its session expires; the standby leads once
    it has, recovers the job and finishes it exactly while the cut lasts; healed, the old
    leader's restarted process stands by, and the job is listed once, its result
    unchanged."""
    local_cluster, _watcher = cluster
    if local_cluster.config["ha.mode"] != "zookeeper":
        pytest.skip("a cut-off process keeps its flock: ha.mode local fails over on death only")
    skip_unless_network_namespaces()
    wait_for(lambda: (o := overview(client)) and len(o.standbys) == 1, 60,
             "a leader with one standby")
    old = leader(client)
    name = next(n for n in local_cluster.jobmanager_names()
                if local_cluster.supervisor.info(n).pid == old.pid)
    marks, job_file = tmp_path / "marks.txt", tmp_path / "slow_sums.py"
    job_file.write_text(SLOW_SUMS.format(marks=str(marks)))
    job_id = client.submit(job_file)
    wait_for(lambda: marks.exists() and len(marks.read_text().split()) >= 4, 180,
             "the job's first records mapped")
    zookeeper = int(re.search(r"^clientPort=(\d+)$", (
        local_cluster.cluster_dir / "zookeeper" / "zoo.cfg").read_text(), re.M).group(1))
    with process_cut_from(old.pid, local_cluster.broker_address().port, zookeeper,
                          refuse_new=(zookeeper,)):
        cut_at = time.monotonic()
        new = wait_for(lambda: (lead := leader(client)).epoch > old.epoch and lead, 30,
                       "a new leader while the old one is cut off")
        took_over = time.monotonic() - cut_at
        result = wait_result(client, job_id, 180)
        assert not psutil.pid_exists(old.pid)  # it stepped down, cut off
    assert new.pid != old.pid
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert dict(collected_rows(result)) == EXPECTED_SUMS
    log = local_cluster.supervisor.info(name).log_path.read_text(errors="replace")
    assert f"pid {old.pid} exited with code {exitcodes.LEADERSHIP_LOST}" in log
    assert "leadership lost (its ZooKeeper session was SUSPENDED)" in log
    wait_for(lambda: (o := overview(client)) and o.leader_epoch == new.epoch
             and len(o.standbys) == 1, 60, "the old leader's new process standing by")
    assert [j.job_id for j in client.all_jobs().jobs if j.job_id == job_id] == [job_id]
    assert dict(collected_rows(client.result(job_id))) == EXPECTED_SUMS
    print(f"\nleader cut off: the standby led after {took_over:.1f} s, the job exact")


def stale_orders_are_refused(local_cluster: LocalCluster, old: p.LeaderInfo,
                             new: p.LeaderInfo) -> None:
    """What the stopped leader had queued reaches a TaskManager once it runs again: a
    deployment, a cancel and a disconnect with its token, sent here through the JobManager
    login while it is still stopped. The TaskManager refuses each for its epoch, in its
    answer (the cause a JobMaster records) and in its log."""
    log = local_cluster.supervisor.info("taskmanager-1").log_path
    disconnects = log.read_text().count("the ResourceManager disconnected us")
    service = connect_service(local_cluster.config, "jobmanager", topics.JOBMANAGER,
                              local_cluster.broker_address("jobmanager"), with_presence=False)
    try:
        executor = service.gateway(TaskExecutorGateway, endpoint_id_of("taskmanager-1"),
                                   old.fencing_token)
        attempt = "stale/v#0/a0"
        deployment = p.SubmitTask(
            "stale", JobGraph("stale", JobKind.DATAFLOW, ()), attempt, "v", 0, 1, 0, 0,
            "stale-allocation", "jobmaster.stale", old.fencing_token, "0" * 64, "stale")
        answer = executor.submit_tasks(p.SubmitTasks.of((deployment,))).result(10)
        assert not answer.results[0].success, "a TaskManager took the stale deployment"
        assert f"from a JobManager of epoch {old.epoch}, older than the leader of epoch " \
               f"{new.epoch}" in answer.results[0].message
        with pytest.raises(RemoteError, match=f"epoch {old.epoch}, older than the leader of "
                                              f"epoch {new.epoch}"):
            executor.cancel_task(p.CancelTask("stale", attempt)).result(10)
        # A stale ResourceManager's disconnect (a tell) would fail every task there.
        executor.disconnect(p.DisconnectTaskManager("taskmanager-1", "stale"))
    finally:
        service.close()
    for refused in (f"the deployment of {attempt} refused", "a DisconnectTaskManager refused"):
        wait_for(lambda r=refused: r in log.read_text(), 10,
                 f"'{refused}' in the TaskManager's log")
    assert log.read_text().count("the ResourceManager disconnected us") == disconnects



def recorded_change(local_cluster: LocalCluster, epoch: int,
                    leading: bool) -> p.LeadershipChanged | None:
    """The LeadershipChanged of ``epoch`` the cluster's flight recorder kept, if any yet."""
    path = local_cluster.cluster_dir / FILE_NAME
    if not path.exists():
        return None
    return next((item.message for item in replay(path) if isinstance(item, RecordedEvent)
                 and isinstance(item.message, p.LeadershipChanged)
                 and (item.message.epoch, item.message.leading) == (epoch, leading)), None)
