"""A real JobMaster on the in-process transport, with a scripted ResourceManager and
TaskExecutor: lost updates, cancels that are never confirmed, zombies and the JobMaster's
own errors all end the job with a cause instead of leaving it waiting for ever."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from clusterdeck.core.checkpointing import CheckpointStatus
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.loader import script_graph
from clusterdeck.core.jobmanager import finalupdates
from clusterdeck.core.jobmanager.jobmaster import JobMaster
from clusterdeck.core.jobmanager.jobstore import JobRecord, ProgressLog
from clusterdeck.core.node.hostidentity import host_identity
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.gateways import JobMasterGateway, ResourceManagerGateway
from clusterdeck.core.protocol.ids import subtask_id
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.snapshots import JobGraphSnapshot
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.protocol.workdir import COMPLETE_FILE, partitions_dir
from clusterdeck.core.rpc import FencedRpcEndpoint, LocalRpcService, RpcEndpoint, handler
from tests.waiting import wait_for

TOKEN = "token-1"
TM = "tm-1"


class ScriptedResourceManager(FencedRpcEndpoint):
    """Offers a slot of ``TM`` for every request, those of one batch in one message."""

    def __init__(self) -> None:
        super().__init__("resourcemanager", TOKEN)
        self.offered = 0

    @handler(p.SlotRequests)
    def slot_requests(self, batch: p.SlotRequests) -> None:
        offers = []
        for request in batch.requests:
            offers.append(p.OfferSlot(request.allocation_id, TM, f"taskexecutor.{TM}",
                                      "host", self.offered))
            self.offered += 1
        if offers:
            self.rpc_service.gateway(JobMasterGateway, batch.requests[0].jobmaster, TOKEN) \
                .offer_slots(p.OfferSlots(tuple(offers)))

    @handler(p.ReleaseJobSlots)
    def release_job_slots(self, _request: p.ReleaseJobSlots) -> None:
        pass


class ScriptedTaskExecutor(RpcEndpoint):
    """Runs nothing: reports RUNNING for what it is given, and answers reports and
    cancels as a test tells it to."""

    def __init__(self, answer_cancels: bool = True) -> None:
        super().__init__(f"taskexecutor.{TM}")
        self.running: list[str] = []
        self.cancelled: list[str] = []
        self.answer_cancels = answer_cancels
        self.batches: list[int] = []
        self.reports: list[int] = []  # one entry per execution report asked for

    @handler(p.SubmitTasks)
    def submit_tasks(self, batch: p.SubmitTasks) -> p.TaskOperationResults:
        self.batches.append(len(batch.tasks))
        for task in batch.deployments():
            self.running.append(task.attempt_id)
            self.rpc_service.gateway(JobMasterGateway, task.jobmaster, TOKEN) \
                .update_task_execution_states(p.UpdateTaskExecutionStates((
                    p.UpdateTaskExecutionState(task.job_id, task.attempt_id,
                                               ExecutionState.RUNNING),)))
        return p.TaskOperationResults(tuple(p.TaskOperationResult(task.attempt_id, True)
                                            for task in batch.tasks))

    @handler(p.RequestExecutionReport)
    def request_execution_report(self, _request: p.RequestExecutionReport
                                 ) -> p.ExecutionReport:
        self.reports.append(len(self.running))
        return p.ExecutionReport(TM, tuple(self.running))

    @handler(p.CancelTask)
    def cancel_task(self, request: p.CancelTask) -> Future[p.TaskOperationResult] | \
            p.TaskOperationResult:
        self.cancelled.append(request.attempt_id)
        if not self.answer_cancels:
            return Future()  # a TaskManager that never answers
        known = request.attempt_id in self.running
        return p.TaskOperationResult(request.attempt_id, True, known=known)


class Outcome:
    def __init__(self) -> None:
        self.result: p.JobResult | None = None

    def ended(self, result: p.JobResult) -> None:
        self.result = result


@pytest.fixture
def service():
    svc = LocalRpcService(ask_timeout=2.0, framesize=256 * 1024)
    yield svc
    svc.close()


def start_job(service: LocalRpcService, tmp_path: Path, taskexecutor: ScriptedTaskExecutor,
              graph: JobGraph | None = None, **settings: object) -> tuple[JobMaster, Outcome]:
    service.start_endpoint(ScriptedResourceManager())
    service.start_endpoint(taskexecutor)
    config = Config({"heartbeat.interval": 0.1, "heartbeat.timeout": 1.0,
                     "restart-strategy.type": "none", **settings})
    record = JobRecord("job-1", graph or script_graph(Path("script.py"), ()), "sha")
    outcome = Outcome()
    jobmaster = JobMaster(config, record, service.gateway(ResourceManagerGateway,
                          "resourcemanager", TOKEN), TOKEN, tmp_path / "work",
                          ProgressLog(tmp_path / "progress.jsonl"),
                          on_status=lambda *_: None, on_terminal=outcome.ended)
    service.start_endpoint(jobmaster)
    wait_for(lambda: taskexecutor.running, 10, "the task to be deployed")
    wait_for(lambda: jobmaster.call_async(lambda: jobmaster.graph.status).result(5)
             is JobStatus.RUNNING, 10, "the job to run")
    return jobmaster, outcome


def test_an_attempt_whose_final_update_was_lost_fails_with_that_cause(service,
                                                                      tmp_path) -> None:
    taskexecutor = ScriptedTaskExecutor()
    _, outcome = start_job(service, tmp_path, taskexecutor)
    taskexecutor.running.clear()  # it ended, and its update never arrived
    result = wait_for(lambda: outcome.result, 10, "the job to end")
    assert result.status is JobStatus.FAILED
    assert result.root_cause["exception_type"] == "UpdateLost"
    assert f"TaskManager {TM} no longer runs this attempt" in result.root_cause["message"]


def test_a_cancel_the_taskmanager_never_answers_ends_canceled_after_the_timeout(
        service, tmp_path) -> None:
    taskexecutor = ScriptedTaskExecutor(answer_cancels=False)
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor,
                                   **{"jobmanager.cancel-timeout": 0.5})
    jobmaster.run_async(jobmaster.cancel)
    result = wait_for(lambda: outcome.result, 10, "the job to end")
    assert result.status is JobStatus.CANCELED
    assert taskexecutor.cancelled


def test_a_cancel_of_an_attempt_no_longer_running_ends_canceled_at_once(service,
                                                                         tmp_path) -> None:
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor,
                                   **{"jobmanager.cancel-timeout": 600})
    taskexecutor.running.clear()
    jobmaster.run_async(jobmaster.cancel)
    assert wait_for(lambda: outcome.result, 10, "the job to end").status is JobStatus.CANCELED


def test_an_attempt_the_jobmaster_does_not_know_is_cancelled_on_its_taskmanager(
        service, tmp_path) -> None:
    taskexecutor = ScriptedTaskExecutor()
    start_job(service, tmp_path, taskexecutor)
    taskexecutor.running.append("job-1/zombie")
    wait_for(lambda: "job-1/zombie" in taskexecutor.cancelled, 10, "the zombie's cancel")


def test_an_error_of_the_jobmaster_itself_fails_its_job_with_that_error(service,
                                                                       tmp_path) -> None:
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor)

    def broken_handler() -> None:
        raise KeyError("no such slot")
    jobmaster.run_async(broken_handler)
    result = wait_for(lambda: outcome.result, 10, "the job to end")
    assert result.status is JobStatus.FAILED
    assert "the JobMaster failed in broken_handler" in result.root_cause["message"]
    assert "no such slot" in result.root_cause["message"]
    wait_for(lambda: taskexecutor.cancelled, 10, "its running attempt to be cancelled")


def test_an_instruction_without_a_handler_fails_the_job_with_that_cause(service,
                                                                      tmp_path) -> None:
    """Even when a TaskManager's update (an ask, whose errors go to the asker) carried it
    out: the job fails rather than go on without it."""
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor)
    jobmaster.run_async(jobmaster._execute, ["an instruction of tomorrow"])
    result = wait_for(lambda: outcome.result, 10, "the job to end")
    assert result.status is JobStatus.FAILED
    assert result.root_cause["exception_type"] == "UnknownInstruction"
    assert "an instruction of tomorrow" in result.root_cause["message"]
    wait_for(lambda: taskexecutor.cancelled, 10, "its running attempt to be cancelled")


def empty_range(parallelism: int) -> JobGraph:
    env = ExecutionEnvironment("batches")
    env.set_parallelism(parallelism)
    env.from_range(0, 0).collect()
    return build_graph(env)[0]


def test_the_deployments_of_one_turn_go_to_a_taskmanager_in_one_message(service,
                                                                        tmp_path) -> None:
    """Four slots offered in one message: four deployments in one SubmitTasks."""
    taskexecutor = ScriptedTaskExecutor()
    start_job(service, tmp_path, taskexecutor, empty_range(4))
    wait_for(lambda: len(taskexecutor.running) == 4, 10, "four deployments")
    assert taskexecutor.batches == [4]


def test_one_acknowledgement_covers_a_batch_of_updates_in_order(service, tmp_path) -> None:
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor, empty_range(3))
    wait_for(lambda: len(taskexecutor.running) == 3, 10, "three deployments")
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    first = taskexecutor.running[0]
    updates = [p.UpdateTaskExecutionState("job-1", attempt, ExecutionState.FINISHED,
                                          result=p.TaskResult())
               for attempt in taskexecutor.running] + [
        p.UpdateTaskExecutionState("job-1", first, ExecutionState.FAILED)]  # too late
    answer = gateway.update_task_execution_states(
        p.UpdateTaskExecutionStates(tuple(updates))).result(5)
    assert [a.attempt_id for a in answer.acknowledgements] == [u.attempt_id for u in updates]
    assert [a.accepted for a in answer.acknowledgements] == [True, True, True, False]
    result = wait_for(lambda: outcome.result, 10, "the job to end")
    assert result.status is JobStatus.FINISHED


def test_a_final_update_whose_files_are_still_fetched_is_not_taken_for_lost(
        service, tmp_path, monkeypatch) -> None:
    """Acknowledged at once, applied once its files are here (a TaskManager on another
    machine): meanwhile its TaskExecutor lists it no more, and several reconciliation
    rounds must not fail it as lost."""
    fetched = threading.Event()
    monkeypatch.setattr(finalupdates, "fetch_unseen", lambda *_: fetched.wait(10))
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor)
    attempt = taskexecutor.running[0]
    update = p.UpdateTaskExecutionState("job-1", attempt, ExecutionState.FINISHED, result=(
        p.TaskResult(collected_path=str(tmp_path / "elsewhere" / "rows.parquet"))))
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    answer = gateway.update_task_execution_states(p.UpdateTaskExecutionStates((update,)))
    assert answer.result(5).acknowledgements[0].accepted
    taskexecutor.running.clear()  # acknowledged: it no longer reports it
    reports = len(taskexecutor.reports)
    wait_for(lambda: len(taskexecutor.reports) >= reports + 5, 10, "reconciliation rounds")
    assert outcome.result is None
    fetched.set()
    result = wait_for(lambda: outcome.result, 10, "the job to end")
    assert result.status is JobStatus.FINISHED, result.root_cause


class CheckpointingTaskExecutor(ScriptedTaskExecutor):
    """Also takes part in checkpoints: every trigger is kept for the test to acknowledge
    (a stateless task: no snapshot), and a failed attempt's deployments are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.triggers: list[p.TriggerCheckpoint] = []
        self.deployments: list[p.SubmitTask] = []

    @handler(p.SubmitTasks)
    def submit_tasks(self, batch: p.SubmitTasks) -> p.TaskOperationResults:
        self.deployments.extend(batch.deployments())
        return super().submit_tasks(batch)

    @handler(p.TriggerCheckpoint)
    def trigger_checkpoint(self, trigger: p.TriggerCheckpoint) -> None:
        self.triggers.append(trigger)

    @handler(p.NotifyCheckpointComplete)
    def notify_checkpoint_complete(self, _notice: p.NotifyCheckpointComplete) -> None:
        pass


def rate_to_files(out: Path) -> JobGraph:
    env = ExecutionEnvironment("rate to files")
    env.enable_checkpointing(0.05)
    env.rate_source(10).write_text(str(out))
    return build_graph(env)[0]


def test_a_streaming_jobs_snapshot_carries_its_checkpoints_and_the_one_it_resumed_from(
        service, tmp_path) -> None:
    snapshots: list[JobGraphSnapshot] = []
    service.subscribe(topics.job_state("job-1"),
                      lambda _topic, message: snapshots.append(message.graph))
    taskexecutor = CheckpointingTaskExecutor()
    jobmaster, _ = start_job(service, tmp_path, taskexecutor, rate_to_files(tmp_path / "out"),
                             **{"restart-strategy.type": "fixed-delay",
                                "restart-strategy.fixed-delay.attempts": 1,
                                "restart-strategy.fixed-delay.delay": 0.0})
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    (task,) = taskexecutor.deployments
    for n in (1, 2):  # the second while nothing else of the job changes
        trigger = wait_for(lambda n=n: len(taskexecutor.triggers) >= n
                           and taskexecutor.triggers[n - 1], 10, f"checkpoint {n}'s trigger")
        gateway.acknowledge_checkpoint(p.AcknowledgeCheckpoint(
            "job-1", trigger.attempt_id, subtask_id(task.vertex_id, task.subtask),
            trigger.checkpoint_id))
    completed = wait_for(lambda: next((s for s in reversed(snapshots) if s.checkpoints
                                       and s.checkpoints.completed == 2), None), 10,
                         "a snapshot with both checkpoints completed")
    assert completed.checkpoints.latest.checkpoint_id == trigger.checkpoint_id == 2
    assert completed.checkpoints.restored is None
    assert completed.checkpoints.history[-1].status is CheckpointStatus.COMPLETED

    failed_at = time.time()
    gateway.update_task_execution_states(p.UpdateTaskExecutionStates((
        p.UpdateTaskExecutionState("job-1", trigger.attempt_id, ExecutionState.FAILED),
    ))).result(5)

    wait_for(lambda: len(taskexecutor.deployments) == 2, 10, "the attempt deployed again")
    assert taskexecutor.deployments[1].restore_checkpoint == trigger.checkpoint_id
    resumed = wait_for(lambda: next((s for s in reversed(snapshots) if s.checkpoints
                                     and s.checkpoints.restored), None), 10,
                       "a snapshot naming the restore")
    assert resumed.checkpoints.restored.checkpoint_id == trigger.checkpoint_id
    assert resumed.checkpoints.restored.restored >= failed_at


class RecordingTaskExecutor(ScriptedTaskExecutor):
    """Also keeps every deployment it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.deployments: list[p.SubmitTask] = []

    @handler(p.SubmitTasks)
    def submit_tasks(self, batch: p.SubmitTasks) -> p.TaskOperationResults:
        self.deployments.extend(batch.deployments())
        return super().submit_tasks(batch)


def test_a_small_file_is_shared_by_every_subtask_of_its_source(service, tmp_path) -> None:
    """Each deployment carries its fair share of the input, and there is a split for each
    subtask's first ask: the first to ask does not take the input whole."""
    path = tmp_path / "small.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    env = ExecutionEnvironment("small input")
    env.set_parallelism(4)
    env.read_text(str(path)).collect()
    taskexecutor = RecordingTaskExecutor()
    jobmaster, _ = start_job(service, tmp_path, taskexecutor, build_graph(env)[0])
    wait_for(lambda: len(taskexecutor.deployments) == 4, 10, "four deployments")
    share = -(-path.stat().st_size // 4)
    assert [task.split_share for task in taskexecutor.deployments] == [share] * 4
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    firsts = [gateway.request_next_input_split(p.RequestNextInputSplit(
        "job-1", task.attempt_id, host_identity())).result(5).split
        for task in taskexecutor.deployments]
    assert all(split is not None and 0 < split.length <= share for split in firsts)


def _finished_elsewhere(tmp_path: Path, attempt: str) -> p.UpdateTaskExecutionState:
    """A FINISHED whose collected rows are on a disk this machine does not see."""
    return p.UpdateTaskExecutionState("job-1", attempt, ExecutionState.FINISHED, result=(
        p.TaskResult(collected_path=str(tmp_path / "elsewhere" / "rows.json"))))


@pytest.mark.parametrize(("delay", "refusal"), [
    (0.05, "stale attempt job-1/"),  # run again meanwhile: a new attempt replaced it
    (600, "is FAILED, cannot become FINISHED"),  # failed, not yet run again
])
def test_a_finished_attempt_of_a_lost_taskmanager_is_refused_before_any_fetch(
        service, tmp_path, monkeypatch, delay: float, refusal: str) -> None:
    """Its TaskManager was cut off and found lost while the attempt finished; after the
    heal it reports FINISHED. The TaskManager is told no, and nothing is fetched."""
    fetches: list[tuple[str, ...]] = []
    monkeypatch.setattr(finalupdates, "fetch_unseen", lambda paths, *_: fetches.append(paths))
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, _ = start_job(service, tmp_path, taskexecutor, **{
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": delay})
    attempt = taskexecutor.running[0]
    jobmaster.run_async(jobmaster._taskmanager_lost, TM, "heartbeat timeout")
    if delay < 1:
        wait_for(lambda: len(taskexecutor.running) == 2, 10, "the subtask to run again")
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    answer = gateway.update_task_execution_states(
        p.UpdateTaskExecutionStates((_finished_elsewhere(tmp_path, attempt),))).result(5)
    (acknowledgement,) = answer.acknowledgements
    assert not acknowledgement.accepted
    assert refusal in acknowledgement.reason
    assert fetches == []


def test_a_finished_attempt_that_is_current_is_fetched_then_applied(
        service, tmp_path, monkeypatch) -> None:
    fetches: list[tuple[str, ...]] = []
    monkeypatch.setattr(finalupdates, "fetch_unseen", lambda paths, *_: fetches.append(paths))
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, outcome = start_job(service, tmp_path, taskexecutor)
    update = _finished_elsewhere(tmp_path, taskexecutor.running[0])
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    answer = gateway.update_task_execution_states(p.UpdateTaskExecutionStates((update,)))
    assert answer.result(5).acknowledgements[0].accepted
    assert wait_for(lambda: outcome.result, 10, "the job to end").status is JobStatus.FINISHED
    assert fetches == [(update.result.collected_path,)]


def test_the_files_of_an_attempt_lost_while_they_were_fetched_are_removed_again(
        service, tmp_path, monkeypatch) -> None:
    """Acknowledged and fetched while current, its TaskManager found lost meanwhile: the
    update is refused when the fetch ends, and the fetched rows go."""
    release = threading.Event()

    def fetch(paths, *_):
        release.wait(10)
        for path in paths:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("[]")
    monkeypatch.setattr(finalupdates, "fetch_unseen", fetch)
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, _ = start_job(service, tmp_path, taskexecutor)
    update = _finished_elsewhere(tmp_path, taskexecutor.running[0])
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    answer = gateway.update_task_execution_states(p.UpdateTaskExecutionStates((update,)))
    assert answer.result(5).acknowledgements[0].accepted
    jobmaster.run_async(jobmaster._taskmanager_lost, TM, "heartbeat timeout")
    release.set()
    rows = Path(update.result.collected_path)
    wait_for(lambda: rows.parent.is_dir() and not rows.exists(), 10, "the rows removed")


def rebalanced_range(parallelism: int) -> JobGraph:
    env = ExecutionEnvironment("rebalanced")
    env.set_parallelism(parallelism)
    env.from_range(0, 10).rebalance().map(lambda n: n).collect()
    return build_graph(env)[0]


def _whole_partitions_here(work_dir: Path, attempt: str, partitions: range) -> None:
    for partition in partitions:
        folder = partitions_dir(work_dir, attempt) / "vertex-2.0" / f"__part={partition}"
        folder.mkdir(parents=True)
        (folder / COMPLETE_FILE).write_text('{"files": []}')


def test_a_lost_taskmanager_takes_the_partitions_not_whole_here_and_their_producer_reruns(
        service, tmp_path) -> None:
    """Both producers finished on the TaskManager, then it is lost: the one whose two
    partitions are on this machine's disk keeps its result, the one with only a copy of
    one of them here (a consumer fetched it) runs again at once, its loss the cause."""
    taskexecutor = ScriptedTaskExecutor()
    jobmaster, _ = start_job(service, tmp_path, taskexecutor, rebalanced_range(2), **{
        "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": 0.05})
    wait_for(lambda: len(taskexecutor.running) == 2, 10, "the producers deployed")
    shared, elsewhere = taskexecutor.running
    _whole_partitions_here(tmp_path / "work", shared, range(2))
    _whole_partitions_here(tmp_path / "work", elsewhere, range(1))
    gateway = service.gateway(JobMasterGateway, jobmaster.endpoint_id, TOKEN)
    gateway.update_task_execution_states(p.UpdateTaskExecutionStates(tuple(
        p.UpdateTaskExecutionState("job-1", attempt, ExecutionState.FINISHED,
                                   result=p.TaskResult()) for attempt in (shared, elsewhere)
    ))).result(5)
    wait_for(lambda: len(taskexecutor.running) == 4, 10, "the consumers deployed")

    jobmaster.run_async(jobmaster._taskmanager_lost, TM, "heartbeat timeout")

    rerun = elsewhere.replace("/a0", "/a1")
    wait_for(lambda: rerun in taskexecutor.running, 10, f"{rerun} deployed")
    assert shared.replace("/a0", "/a1") not in taskexecutor.running
    (record,) = [f for f in jobmaster.graph.failures if f.attempt_id == elsewhere]
    assert record.failure.message == \
        f"result partitions lost with TaskManager {TM}: heartbeat timeout"
