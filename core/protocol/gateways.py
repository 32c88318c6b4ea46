"""One typed gateway per endpoint: the calls it accepts, and how (tell or ask)."""

from __future__ import annotations

from concurrent.futures import Future

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.rpc import Gateway


class ResourceManagerGateway(Gateway):
    def register_task_manager(self, msg: p.RegisterTaskManager,
                              timeout: float | None = None) -> Future[p.RegistrationResponse]:
        return self.ask(msg, timeout)

    def heartbeat_from_task_manager(self, msg: p.TaskManagerHeartbeat) -> None:
        self.tell_heartbeat(msg)

    def request_cluster_overview(self) -> Future[p.ClusterOverview]:
        return self.ask(p.RequestClusterOverview())

    def slot_requests(self, msg: p.SlotRequests) -> None:
        self.tell(msg)

    def release_job_slots(self, msg: p.ReleaseJobSlots) -> None:
        self.tell(msg)

    def taskmanager_start_failed(self, msg: p.TaskManagerStartFailed) -> None:
        self.tell(msg)


class TaskExecutorGateway(Gateway):
    def heartbeat_from_resource_manager(self, msg: p.ResourceManagerHeartbeat) -> None:
        self.tell_heartbeat(msg)

    def disconnect(self, msg: p.DisconnectTaskManager) -> None:
        self.tell(msg)

    def submit_tasks(self, msg: p.SubmitTasks, timeout: float | None = None
                     ) -> Future[p.TaskOperationResults]:
        return self.ask(msg, timeout)

    def cancel_task(self, msg: p.CancelTask) -> Future[p.TaskOperationResult]:
        return self.ask(msg)

    def request_execution_report(self, msg: p.RequestExecutionReport,
                                 timeout: float | None = None) -> Future[p.ExecutionReport]:
        return self.ask(msg, timeout)

    def trigger_checkpoint(self, msg: p.TriggerCheckpoint) -> None:
        self.tell(msg)

    def notify_checkpoint_complete(self, msg: p.NotifyCheckpointComplete) -> None:
        self.tell(msg)

    def notify_checkpoint_aborted(self, msg: p.NotifyCheckpointAborted) -> None:
        self.tell(msg)


class JobMasterGateway(Gateway):
    def offer_slots(self, msg: p.OfferSlots) -> None:
        self.tell(msg)

    def task_output(self, msg: p.TaskOutput) -> None:
        self.tell(msg)

    def spark_work_report(self, msg: p.SparkWorkReport) -> None:
        self.tell(msg)

    def update_task_execution_states(self, msg: p.UpdateTaskExecutionStates,
                                     timeout: float | None = None
                                     ) -> Future[p.UpdatesAcknowledged]:
        return self.ask(msg, timeout)

    def request_next_input_split(self, msg: p.RequestNextInputSplit,
                                 timeout: float | None = None) -> Future[p.NextInputSplit]:
        return self.ask(msg, timeout)

    def request_input_partitions(self, msg: p.RequestInputPartitions,
                                 timeout: float | None = None) -> Future[p.InputPartitions]:
        return self.ask(msg, timeout)

    def acknowledge_checkpoint(self, msg: p.AcknowledgeCheckpoint) -> None:
        self.tell(msg)

    def decline_checkpoint(self, msg: p.DeclineCheckpoint) -> None:
        self.tell(msg)

    def request_state_chunk(self, msg: p.RequestStateChunk,
                            timeout: float | None = None) -> Future[p.JobFileChunk]:
        return self.ask(msg, timeout)


class DispatcherGateway(Gateway):
    def request_cluster_overview(self, timeout: float | None = None
                                 ) -> Future[p.ClusterOverview]:
        return self.ask(p.RequestClusterOverview(), timeout)

    def upload_artifact_chunk(self, msg: p.UploadArtifactChunk
                              ) -> Future[p.ArtifactChunkReceived]:
        return self.ask(msg)

    def submit_job(self, msg: p.SubmitJob) -> Future[p.JobSubmitted]:
        return self.ask(msg)

    def request_artifact_chunk(self, msg: p.RequestArtifactChunk) -> Future[p.ArtifactChunk]:
        return self.ask(msg)

    def request_job_list(self, offset: int = 0, limit: int = 0,
                         timeout: float | None = None) -> Future[p.JobList]:
        return self.ask(p.RequestJobList(offset, limit), timeout)

    def trigger_savepoint(self, msg: p.TriggerSavepoint, timeout: float | None = None
                          ) -> Future[p.SavepointCompleted]:
        return self.ask(msg, timeout)

    def cancel_job(self, job_id: str) -> Future[p.JobSummary]:
        return self.ask(p.CancelJob(job_id))

    def request_job_result(self, job_id: str, timeout: float | None = None
                           ) -> Future[p.JobResult]:
        return self.ask(p.RequestJobResult(job_id), timeout)

    def request_job_file(self, msg: p.RequestJobFile) -> Future[p.JobFileChunk]:
        return self.ask(msg)
