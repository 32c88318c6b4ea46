"""A real JobMaster's blocklist, whole, on the in-process transport: an attempt fails with
DiskFull on one TaskManager, the job blocks it, its slot requests say so, an offer of
the blocked one made before the block is handed back and asked for again, the attempt
runs on the other TaskManager, and the block ends with its timeout."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.loader import script_graph
from clusterdeck.core.jobmanager.jobmaster import JobMaster, endpoint_id_of
from clusterdeck.core.jobmanager.jobstore import JobRecord, ProgressLog
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.causes import CauseKind
from clusterdeck.core.protocol.failures import DISK_FULL, TaskFailure
from clusterdeck.core.protocol.gateways import JobMasterGateway, ResourceManagerGateway
from clusterdeck.core.protocol.jobgraph import JobGraph
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import FencedRpcEndpoint, LocalRpcService, RpcEndpoint, handler
from tests.waiting import wait_for

TOKEN = "token-1"
FULL, OK = "tm-full", "tm-ok"
BLOCKED_FOR = 1.5  # seconds: jobmanager.blocklist.timeout, short for the test


class ResourceManager(FencedRpcEndpoint):
    """Offers a slot of ``FULL`` for the first ``full_first`` requests, and (``cross``)
    once more for the first request that names ``FULL`` blocked (an offer that crossed
    the block); else a slot of ``OK``. Keeps every request and free."""

    def __init__(self, full_first: int = 1, cross: bool = True) -> None:
        super().__init__("resourcemanager", TOKEN)
        self.requests: list[p.RequestSlot] = []
        self.frees: list[p.FreeSlot] = []
        self.full_first = full_first
        self.crossed = not cross

    @handler(p.SlotRequests)
    def slot_requests(self, batch: p.SlotRequests) -> None:
        self.frees += batch.frees
        for request in batch.requests:
            self.requests.append(request)
            taskmanager = OK
            if len(self.requests) <= self.full_first:
                taskmanager = FULL
            elif FULL in request.blocked and not self.crossed:
                self.crossed, taskmanager = True, FULL
            self.rpc_service.gateway(JobMasterGateway, request.jobmaster, TOKEN).offer_slots(
                p.OfferSlots((p.OfferSlot(request.allocation_id, taskmanager,
                                          f"taskexecutor.{taskmanager}", "host",
                                          len(self.requests)),)))

    @handler(p.ReleaseJobSlots)
    def release_job_slots(self, _request: p.ReleaseJobSlots) -> None:
        pass


class TaskExecutor(RpcEndpoint):
    """Runs nothing: reports RUNNING for what it is given; on ``FULL`` the attempt of
    subtask 0 then fails with a full work dir, and the others wait there to start (deployed
    behind a slot's holder), until cancelled."""

    def __init__(self, resource_id: str) -> None:
        super().__init__(f"taskexecutor.{resource_id}")
        self.resource_id = resource_id
        self.deployed: list[str] = []
        self.cancelled: list[str] = []

    @handler(p.SubmitTasks)
    def submit_tasks(self, batch: p.SubmitTasks) -> p.TaskOperationResults:
        for task in batch.deployments():
            self.deployed.append(task.attempt_id)
            if self.resource_id == FULL and task.subtask:
                continue
            updates = [p.UpdateTaskExecutionState(task.job_id, task.attempt_id,
                                                  ExecutionState.RUNNING)]
            if self.resource_id == FULL:
                updates.append(p.UpdateTaskExecutionState(
                    task.job_id, task.attempt_id, ExecutionState.FAILED,
                    TaskFailure(DISK_FULL, f"TaskManager {FULL}'s work dir /w is full")))
            self.rpc_service.gateway(JobMasterGateway, task.jobmaster, TOKEN) \
                .update_task_execution_states(p.UpdateTaskExecutionStates(tuple(updates)))
        return p.TaskOperationResults(tuple(p.TaskOperationResult(task.attempt_id, True)
                                            for task in batch.tasks))

    @handler(p.RequestExecutionReport)
    def request_execution_report(self, _request: p.RequestExecutionReport
                                 ) -> p.ExecutionReport:
        return p.ExecutionReport(self.resource_id, tuple(self.deployed))

    @handler(p.CancelTask)
    def cancel_task(self, request: p.CancelTask) -> p.TaskOperationResult:
        self.cancelled.append(request.attempt_id)
        self.rpc_service.gateway(JobMasterGateway, endpoint_id_of(request.job_id), TOKEN) \
            .update_task_execution_states(p.UpdateTaskExecutionStates((
                p.UpdateTaskExecutionState(request.job_id, request.attempt_id,
                                           ExecutionState.CANCELED),)))
        return p.TaskOperationResult(request.attempt_id, True)


def start(service: LocalRpcService, tmp_path: Path, resource_manager: ResourceManager,
          full: TaskExecutor, ok: TaskExecutor, graph: JobGraph) -> JobMaster:
    for endpoint in (resource_manager, full, ok):
        service.start_endpoint(endpoint)
    config = Config({"heartbeat.interval": 0.1, "heartbeat.timeout": 1.0,
                     "restart-strategy.type": "fixed-delay",
                     "restart-strategy.fixed-delay.attempts": 3,
                     "restart-strategy.fixed-delay.delay": 0.05,
                     "jobmanager.blocklist.timeout": BLOCKED_FOR})
    jobmaster = JobMaster(config, JobRecord("job-1", graph, "sha"),
                          service.gateway(ResourceManagerGateway, "resourcemanager", TOKEN),
                          TOKEN, tmp_path / "work", ProgressLog(tmp_path / "progress.jsonl"),
                          on_status=lambda *_: None, on_terminal=lambda _result: None)
    service.start_endpoint(jobmaster)
    return jobmaster


@pytest.fixture
def service():
    svc = LocalRpcService(ask_timeout=2.0, framesize=256 * 1024)
    yield svc
    svc.close()


def test_a_full_disk_blocks_its_taskmanager_its_offer_goes_back_and_the_block_ends(
        service: LocalRpcService, tmp_path: Path) -> None:
    resource_manager, full, ok = ResourceManager(), TaskExecutor(FULL), TaskExecutor(OK)
    jobmaster = start(service, tmp_path, resource_manager, full, ok,
                      script_graph(Path("script.py"), ()))

    def blocked() -> tuple[str, ...]:
        return jobmaster.call_async(jobmaster.blocklist.blocked).result(5)

    wait_for(lambda: ok.deployed, 10, "the attempt deployed on the other TaskManager")
    assert blocked() == (FULL,)
    wait_for(lambda: blocked() == (), BLOCKED_FOR + 10, "the block to end with its timeout")

    first, crossed, again = resource_manager.requests
    assert (len(full.deployed), len(ok.deployed)) == (1, 1)
    assert first.blocked == () and crossed.blocked == again.blocked == (FULL,)
    # the failed attempt's slot, then the offer that crossed the block: both handed back
    assert [f.allocation_id for f in resource_manager.frees] == [first.allocation_id,
                                                                 crossed.allocation_id]
    assert again.allocation_id != crossed.allocation_id
    graph, chain = jobmaster.call_async(
        lambda: (jobmaster.graph.snapshot(), jobmaster.causes.chain())).result(5)
    assert graph.status is JobStatus.RUNNING
    assert [f.failure.exception_type for f in graph.failures] == [DISK_FULL]
    assert chain is not None and [e.taskmanager_id for e in chain.events
                                  if e.kind is CauseKind.TASKMANAGER_BLOCKED] == [FULL]


def test_an_attempt_waiting_to_start_on_a_taskmanager_blocked_now_runs_elsewhere(
        service: LocalRpcService, tmp_path: Path) -> None:
    """Both subtasks went to the full disk's TaskManager; subtask 0 fails there while
    subtask 1 waits to start: the block cancels it there and it runs on the other one,
    counting no failure."""
    env = ExecutionEnvironment("two")
    env.set_parallelism(2)
    env.from_range(0, 0).collect()
    resource_manager, full, ok = ResourceManager(full_first=2, cross=False), \
        TaskExecutor(FULL), TaskExecutor(OK)
    jobmaster = start(service, tmp_path, resource_manager, full, ok, build_graph(env)[0])

    wait_for(lambda: len(ok.deployed) == 2, 10, "both subtasks on the other TaskManager")

    waiting = [a for a in full.deployed if "#1/" in a]
    assert full.cancelled == waiting and len(waiting) == 1
    graph = jobmaster.call_async(lambda: jobmaster.graph.snapshot()).result(5)
    assert [f.failure.exception_type for f in graph.failures] == [DISK_FULL]
