"""A SubmitTasks says its deployments' shared part once and gives back each deployment."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.jobgraph import InputSplit, JobGraph, JobKind
from clusterdeck.core.rpc import CodecError, Envelope, decode, encode

FRAMESIZE = 1 << 20


def deployment(subtask: int, job_id: str = "job") -> p.SubmitTask:
    return p.SubmitTask(job_id, JobGraph("j", JobKind.DATAFLOW, ()), f"{job_id}/v#{subtask}/a0",
                        "v", subtask, 4, 0, subtask % 2, f"alloc-{subtask}", f"jobmaster.{job_id}",
                        "token", "sha", "/work/job", ("a", "b"), task_timeout=5.0,
                        splits=(InputSplit(subtask, "v", part=subtask, parts=4),),
                        splits_given=True)


def test_every_field_of_a_deployment_is_the_jobs_or_the_attempts_once() -> None:
    job = {f.name for f in fields(p.JobDeployment)}
    task = {f.name for f in fields(p.TaskDeployment)}
    assert not job & task
    assert job | task == {f.name for f in fields(p.SubmitTask)}


def test_the_deployments_come_back_whole_and_in_order_through_the_codec() -> None:
    sent = tuple(deployment(i) for i in range(4))
    wire = encode(Envelope("ask", "jobmaster.job", p.SubmitTasks.of(sent)), FRAMESIZE)
    assert wire.count(b'"graph"') == 1
    assert decode(wire, FRAMESIZE).message.deployments() == sent


def test_one_batch_is_one_jobs() -> None:
    with pytest.raises(ValueError, match="not of job job"):
        p.SubmitTasks.of((deployment(0), deployment(1, job_id="other")))
    with pytest.raises(ValueError, match="not of job job"):
        p.SubmitTasks.of((deployment(0), replace(deployment(1), fencing_token="new")))


def test_a_file_sources_fair_share_crosses_the_wire_and_must_be_a_number() -> None:
    sent = (replace(deployment(0), splits=(), splits_given=False, split_share=2500),)
    wire = encode(Envelope("ask", "jobmaster.job", p.SubmitTasks.of(sent)), FRAMESIZE)
    assert decode(wire, FRAMESIZE).message.deployments()[0].split_share == 2500
    with pytest.raises(CodecError, match="split_share"):
        decode(wire.replace(b'"split_share":2500', b'"split_share":"all"'), FRAMESIZE)
