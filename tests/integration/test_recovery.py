"""A job store with broken records, and submissions sent more than once, on a real cluster.

A restarted JobManager must run on every valid job however many broken records lie
before it in the store, and show or set aside every broken one. A submission whose answer
was lost is sent again under the same job id and must run once. One cluster serves the
module; the JobManager is killed last.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from clusterdeck.core.cli.jobcommands import submit_and_follow
from clusterdeck.core.client import jobclient
from clusterdeck.core.client.jobclient import JobClient, collected_rows
from clusterdeck.core.config import paths
from clusterdeck.core.jobapi.artifact import pack_artifact
from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.node import exitcodes
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import AskTimeoutError, RemoteError, RpcError
from tests.integration.clusters import QUICK_RESTARTS, wait_result
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster(QUICK_RESTARTS)]

KEYED_SUMS = ("def build(env):\n"
              "    (env.from_range(0, 40, parallelism=2).map(lambda x: (x % 4, x))\n"
              "        .key_by(0).reduce(lambda a, b: (a[0], a[1] + b[1])).collect())\n")
EXPECTED_SUMS = {key: sum(x for x in range(40) if x % 4 == key) for key in range(4)}
MARKING = ("def build(env):\n"
           "    def mark(x):\n"
           "        with open({marks!r}, 'a') as marks:\n"
           "            marks.write(f'{{x}}\\n')\n"
           "        return x\n"
           "    env.from_range(0, 10, parallelism=2).map(mark).collect()\n")


def marking_job(tmp_path: Path) -> tuple[Path, Path]:
    """A job that appends each of its ten records to a file: a job run twice shows."""
    marks = tmp_path / "marks.txt"
    job = tmp_path / "marking.py"
    job.write_text(MARKING.format(marks=str(marks)))
    return job, marks


def marked(marks: Path) -> list[int]:
    return sorted(int(line) for line in marks.read_text().split())


def answered(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def timed_out() -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(AskTimeoutError("no answer (the test lost it)"))
    return future


class LosingAnswers:
    """A Dispatcher gateway whose SubmitJob answers are lost: the first ``lose`` of them
    after the Dispatcher handled the ask, or every one without sending it."""

    def __init__(self, gateway: Any, sent: list[p.SubmitJob], lose: int | None) -> None:
        self.gateway, self.sent, self.lose = gateway, sent, lose

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)

    def submit_job(self, message: p.SubmitJob) -> Future[p.JobSubmitted]:
        self.sent.append(message)
        if self.lose is None:
            return timed_out()
        answer = self.gateway.submit_job(message).result()
        return timed_out() if len(self.sent) <= self.lose else answered(answer)


def losing_answers(client: JobClient, monkeypatch: pytest.MonkeyPatch,
                   lose: int | None) -> list[p.SubmitJob]:
    sent: list[p.SubmitJob] = []
    real = client.dispatcher
    monkeypatch.setattr(client, "dispatcher",
                        lambda timeout=5.0: LosingAnswers(real(timeout), sent, lose))
    monkeypatch.setattr(jobclient, "SUBMIT_RETRY_DELAY", 0.0)
    return sent


def upload(client: JobClient, job_file: Path) -> tuple[p.SubmitJob, str]:
    """Upload the job's artifact by hand; the SubmitJob that names it, and the upload id."""
    job, artifact = load_job(job_file, ()), pack_artifact(job_file)
    dispatcher = client.dispatcher()
    upload_id = os.urandom(8).hex()
    pieces = list(artifact.chunks(4096))
    for index, piece in enumerate(pieces):
        dispatcher.upload_artifact_chunk(p.UploadArtifactChunk(
            upload_id, index, len(pieces), base64.b64encode(piece).decode(),
            artifact.sha256)).result()
    return p.SubmitJob(os.urandom(8).hex(), job.graph, upload_id, artifact.sha256), upload_id


# -- the same submission sent again ---------------------------------------------------------


def test_the_same_submit_job_sent_twice_answers_the_same_job_and_runs_it_once(
        client, tmp_path) -> None:
    job_file, marks = marking_job(tmp_path)
    request, _ = upload(client, job_file)
    dispatcher = client.dispatcher()
    first = dispatcher.submit_job(request).result()
    again = dispatcher.submit_job(request).result()  # its upload is gone: it is not needed
    assert first == again == p.JobSubmitted(request.job_id)
    other_graph = p.SubmitJob(request.job_id, load_job(job_file, ("x",)).graph,
                              request.upload_id, request.artifact_sha256, ("x",))
    with pytest.raises(RemoteError, match="already submitted"):
        dispatcher.submit_job(other_graph).result()
    result = wait_result(client, request.job_id, 240)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert sorted(collected_rows(result)) == list(range(10))
    assert marked(marks) == list(range(10))  # each record once: the job ran once


def test_a_submission_whose_answer_was_lost_is_sent_again_and_runs_once(
        client, tmp_path, monkeypatch) -> None:
    job_file, marks = marking_job(tmp_path)
    sent = losing_answers(client, monkeypatch, lose=1)
    job_id = client.submit(job_file)
    assert [m.job_id for m in sent] == [job_id, job_id]
    assert sent[0].upload_id != sent[1].upload_id  # the artifact was uploaded again
    result = wait_result(client, job_id, 240)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert marked(marks) == list(range(10))


def test_submit_exits_unreachable_naming_the_job_when_no_try_is_answered(
        client, tmp_path, monkeypatch, capsys) -> None:
    job_file, _ = marking_job(tmp_path)
    sent = losing_answers(client, monkeypatch, lose=None)
    code = submit_and_follow(client, job_file, [], None, detached=True)
    assert code == exitcodes.UNREACHABLE
    assert len(sent) == jobclient.SUBMIT_TRIES
    error = capsys.readouterr().err
    assert f"did not confirm job {sent[0].job_id} after {jobclient.SUBMIT_TRIES} tries" in error
    assert f"clusterdeck result {sent[0].job_id}" in error
    assert "Traceback" not in error


# -- recovery past broken records -------------------------------------------------------------


def plant(store: Path, template: dict[str, Any], name: str, submitted_at: float,
          artifact: bytes | None, **changes: Any) -> None:
    """A job folder as an earlier JobManager (or a damaged disk) could have left it: the
    finished template's record, made unfinished, under another name."""
    folder = store / name
    folder.mkdir()
    record = {**template, "job_id": name, "status": "RUNNING", "result": None, "epoch": 0,
              "submitted_at": submitted_at, **changes}
    (folder / "job.json").write_text(json.dumps(record))
    if artifact is not None:
        (folder / "artifact.zip").write_bytes(artifact)


def test_a_restarted_jobmanager_recovers_every_valid_job_past_the_broken_ones(
        client, cluster, tmp_path) -> None:
    local_cluster, watcher = cluster
    job_file = tmp_path / "keyed_sums.py"
    job_file.write_text(KEYED_SUMS)
    template_id = client.submit(job_file)
    assert wait_result(client, template_id, 240).status == JobStatus.FINISHED
    store = local_cluster.cluster_dir / "jobs"
    template = json.loads((store / template_id / "job.json").read_text())
    artifact = (store / template_id / "artifact.zip").read_bytes()
    graph = template["graph"]
    assert graph["edges"], "the template job needs an edge to make a cycle of"
    zero = {**graph, "vertices": [{**graph["vertices"][0], "parallelism": 0},
                                  *graph["vertices"][1:]]}
    edge = graph["edges"][0]
    cycle = {**graph, "edges": [*graph["edges"],
                                {**edge, "source": edge["target"], "target": edge["source"]}]}
    # Oldest first: every broken record comes before the valid jobs it must not block.
    start = time.time() - 60
    plant(store, template, "zero-parallelism", start + 1, artifact, graph=zero)
    plant(store, template, "cycle", start + 2, artifact, graph=cycle)
    plant(store, template, "no-artifact", start + 3, None)
    plant(store, template, "other-artifact", start + 4, b"PK" + artifact[2:][::-1])
    plant(store, template, "a..b", start + 5, artifact)
    plant(store, template, "renamed", start + 6, artifact, job_id="someone-else")
    plant(store, template, "cancelling", start + 7, artifact, status="CANCELLING")
    (store / "not-json").mkdir()
    (store / "not-json" / "job.json").write_text('{"job_id": "not-json", "graph": ')
    valid = ["valid-1", "valid-2"]
    for index, name in enumerate(valid):
        plant(store, template, name, start + 10 + index, artifact)
    shutil.rmtree(local_cluster.cluster_dir / "work" / template_id, ignore_errors=True)

    old_pid = wait_for(lambda: local_cluster.supervisor.info("jobmanager").pid, 30,
                       "the JobManager running")
    os.kill(old_pid, signal.SIGKILL)
    wait_for(lambda: local_cluster.supervisor.info("jobmanager").pid not in (None, old_pid),
             60, "the JobManager restarted")

    for name in valid:
        result = wait_result(client, name, 240)
        assert result.status == JobStatus.FINISHED, result.root_cause
        assert dict(collected_rows(result)) == EXPECTED_SUMS

    def result_of(job_id: str) -> p.JobResult | None:
        try:
            return client.result(job_id)
        except RpcError:
            return None
    for name, says in [("zero-parallelism", "parallelism 0"), ("cycle", "cycle"),
                       ("no-artifact", "is missing"), ("other-artifact", "not the one submitted")]:
        result = wait_for(lambda name=name: (r := result_of(name)) and r.is_terminal and r,
                          60, f"job {name} failed")
        assert result.status == JobStatus.FAILED
        assert result.root_cause["exception_type"] == "BrokenJobRecord"
        assert result.root_cause["message"].startswith("the stored record is broken: ")
        assert says in result.root_cause["message"]
    # A cancel asked for before the JobManager stopped is carried out, not run on.
    cancelled = wait_for(lambda: (r := result_of("cancelling")) and r.is_terminal and r, 60,
                         "the job being cancelled ended")
    assert (cancelled.status, cancelled.root_cause) == (JobStatus.CANCELED, None)
    listed = {summary.job_id: summary.status for summary in client.jobs().jobs}
    assert {name: listed.get(name) for name in [*valid, "cycle", "no-artifact",
                                                "cancelling"]} == {
        "valid-1": JobStatus.FINISHED, "valid-2": JobStatus.FINISHED,
        "cycle": JobStatus.FAILED, "no-artifact": JobStatus.FAILED,
        "cancelling": JobStatus.CANCELED}

    log = paths.cluster_log_dir(local_cluster.cluster_id) / "jobmanager.log"
    for name in ["a..b", "renamed", "not-json"]:
        assert (store / f"{name}.broken").is_dir() and not (store / name).exists()
        assert name not in listed
        wait_for(lambda name=name: f"set aside as {name}.broken" in log.read_text(), 30,
                 f"the JobManager's log naming {name}")
    watcher.wait_registered(["taskmanager-1", "taskmanager-2"], timeout=120)
