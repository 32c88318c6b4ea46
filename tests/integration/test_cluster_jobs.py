"""Jobs on a real cluster: broker, JobManager and TaskManagers as processes, Spark in each
TaskManager. Every result is checked against an independent computation in plain Python.

One cluster serves the module: Spark starts once per TaskManager, never once per test.
"""

from __future__ import annotations

import csv
import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from clusterdeck.broker.client import connect_and_wait, make_client
from clusterdeck.core.client.jobclient import JobClient, collected_rows, new_job_id
from clusterdeck.core.config import paths
from clusterdeck.core.jobapi.errors import JobLoadError
from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol import topics
from clusterdeck.core.protocol.states import ExecutionState, JobStatus
from clusterdeck.core.rpc import RemoteError
from tests.integration.clusters import QUICK_RESTARTS, wait_result
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cluster(
    {"spark.start": "eager", "job.split-size": "64 KiB", **QUICK_RESTARTS})]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORDS = ["spark", "flink", "actor", "slot", "mailbox", "fencing", "broker", "heartbeat",
         "split", "vertex"]


def run(client: JobClient, job_file: Path, *args: str, timeout: float = 240) -> p.JobResult:
    return wait_result(client, client.submit(job_file, args), timeout)


def text_files(folder: Path, files: int, lines: int, seed: int) -> Counter:
    rng = random.Random(seed)
    expected: Counter = Counter()
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        rows = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
                for _ in range(lines)]
        (folder / f"part-{index:03d}.txt").write_text("\n".join(rows) + "\n")
        for row in rows:
            expected.update(re.findall(r"[a-z']+", row))
    return expected


def counts(result: p.JobResult) -> Counter:
    return Counter({word: count for word, count in collected_rows(result)})


@pytest.mark.parametrize("parallelism", [1, 3, 4])
def test_word_count_over_many_small_files_matches_python(client, tmp_path, parallelism) -> None:
    expected = text_files(tmp_path / "words", files=24, lines=40, seed=parallelism)
    result = run(client, EXAMPLES / "wordcount.py", str(tmp_path / "words"), str(parallelism))
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert counts(result) == expected
    assert result.accumulators["lines"] == 24 * 40


def test_word_count_over_one_large_file_cut_into_blocks_reads_every_line_once(
        client, tmp_path) -> None:
    expected = text_files(tmp_path / "big", files=1, lines=6000, seed=7)
    size = (tmp_path / "big" / "part-000.txt").stat().st_size
    assert size > 3 * 64 * 1024, "the file must be cut into several 64 KiB blocks"
    result = run(client, EXAMPLES / "wordcount.py", str(tmp_path / "big"), "3")
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert counts(result) == expected
    assert result.accumulators["lines"] == 6000  # no line lost or read twice at a cut
    source = min(result.records)
    assert result.records[source]["in"] == 6000


def test_a_small_text_input_is_read_by_every_subtask_of_its_source(client, tmp_path) -> None:
    """Less input than a split (64 KiB here): each of the four source subtasks reads a
    fair share of it, none is left idle, and every line is written once. Each line takes
    2 ms: a share of ~500 lines runs long enough for all four subtasks to ask for their
    first split (a subtask done with its share takes more, as it should: with no delay
    a share runs locally in a millisecond and the first subtasks took every split)."""
    rng = random.Random(34)
    lines = [f"{n} {rng.choice(WORDS)}" for n in range(2000)]
    source = tmp_path / "small.txt"
    source.write_text("\n".join(lines) + "\n")
    assert source.stat().st_size < 64 * 1024, "the input must be smaller than one split"
    out = tmp_path / "copied"
    job = tmp_path / "copy.py"
    job.write_text("import time\n\n"
                   "def upper(line):\n"
                   "    time.sleep(0.002)\n"
                   "    return line.upper()\n\n"
                   "def build(env):\n"
                   "    env.set_parallelism(4)\n"
                   f"    env.read_text({str(source)!r}).map(upper).write_text({str(out)!r})\n")
    # Both TaskManagers' Spark up first (2,000 rows a subtask run on Spark): a task waits
    # for its TaskManager's SparkSession, so one still starting left its subtasks idle.
    warm = tmp_path / "warm.py"
    warm.write_text("def build(env):\n"
                    "    env.set_parallelism(4)\n"
                    "    env.from_range(0, 8000).map(str).collect()\n")
    assert run(client, warm).status == JobStatus.FINISHED
    result = run(client, job)
    assert result.status == JobStatus.FINISHED, result.root_cause
    per_subtask: Counter = Counter()
    written: list[str] = []
    for part in out.glob("part-*"):
        rows = part.read_text().splitlines()
        per_subtask[int(part.name.split("-")[1])] += len(rows)
        written.extend(rows)
    assert sorted(written) == sorted(line.upper() for line in lines)
    assert sorted(per_subtask) == [0, 1, 2, 3] and min(per_subtask.values()) > 0, per_subtask


def test_the_join_of_two_csv_files_matches_python(client) -> None:
    with open(EXAMPLES / "data" / "users.csv") as f:
        users = {int(r["user_id"]): r for r in csv.DictReader(f)}
    with open(EXAMPLES / "data" / "orders.csv") as f:
        expected = sorted((int(o["order_id"]), users[int(o["user_id"])]["name"])
                          for o in csv.DictReader(f) if int(o["user_id"]) in users)
    result = run(client, EXAMPLES / "join_csv.py")
    assert result.status == JobStatus.FINISHED, result.root_cause
    rows = collected_rows(result)
    assert sorted((row["order_id"], row["name"]) for row in rows) == expected


def test_the_sql_aggregate_matches_python(client) -> None:
    result = run(client, EXAMPLES / "sql_aggregate.py")
    assert result.status == JobStatus.FINISHED, result.root_cause
    with open(EXAMPLES / "data" / "users.csv") as f:
        country = {int(r["user_id"]): r["country"] for r in csv.DictReader(f)}
    revenue: Counter = Counter()
    orders: Counter = Counter()
    with open(EXAMPLES / "data" / "orders.csv") as f:
        for order in csv.DictReader(f):
            if int(order["user_id"]) in country:
                revenue[country[int(order["user_id"])]] += float(order["amount"])
                orders[country[int(order["user_id"])]] += 1
    rows = collected_rows(result)
    assert {row["country"] for row in rows} == set(revenue)
    for row in rows:
        assert row["orders"] == orders[row["country"]]
        assert row["revenue"] == pytest.approx(revenue[row["country"]], abs=0.01)
    assert [row["revenue"] for row in rows] == sorted((r["revenue"] for r in rows),
                                                      reverse=True)


def test_collect_returns_every_row(client, tmp_path) -> None:
    job = tmp_path / "squares.py"
    job.write_text("def build(env):\n"
                   "    env.set_parallelism(3)\n"
                   "    env.from_range(0, 5000).map(lambda x: x * x).collect()\n")
    result = run(client, job)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert sorted(collected_rows(result)) == [x * x for x in range(5000)]


def test_a_job_with_siblings_named_core_gui_and_broker_runs_with_its_own(client,
                                                                      tmp_path) -> None:
    (tmp_path / "core.py").write_text("def tag(x):\n    return f'core:{x}'\n")
    (tmp_path / "gui.py").write_text("LABEL = '/gui-own'\n")
    (tmp_path / "broker.py").write_text("def double(x):\n    return 2 * x\n")
    job = tmp_path / "siblings.py"
    job.write_text("import broker\nimport core\nimport gui\n\n"
                   "def build(env):\n"
                   "    env.set_parallelism(2)\n"
                   "    env.from_range(0, 100).map(label).collect()\n\n"
                   "def label(x):\n"
                   "    return core.tag(broker.double(x)) + gui.LABEL\n")
    result = run(client, job)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert sorted(collected_rows(result)) == sorted(f"core:{2 * x}/gui-own" for x in range(100))


def test_a_job_of_many_subtasks_lists_its_files_in_a_manifest(client, tmp_path) -> None:
    job = tmp_path / "wide.py"
    job.write_text("def build(env):\n"
                   "    env.from_range(0, 300, parallelism=120).collect()\n")
    result = run(client, job)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert result.collected_total == 120 > len(result.collected_paths)
    assert Path(result.files_manifest).is_file()
    assert sorted(collected_rows(result)) == list(range(300))


def test_a_consumer_of_two_thousand_producers_gets_its_inputs_and_finishes(
        client, tmp_path) -> None:
    """Its deployment lists 2,000 input partitions, over rpc.framesize: the partitions are
    fetched page by page instead of the deployment being dropped (the job hung at 2000/2001).
    Each producer reads its own part of the range: 40 hold a number, the other 1,960 are
    empty and write empty partitions without a Spark job, which the consumer reads too."""
    out = tmp_path / "tripled"
    job = tmp_path / "fan_in.py"
    job.write_text("def build(env):\n"
                   "    env.from_range(0, 40, parallelism=2000).map(lambda x: x * 3)"
                   f".write_text({str(out)!r}, parallelism=1)\n")
    job_id = new_job_id()  # its events followed from the start: deployed in batches, and
    moves: list[p.ExecutionStateEvent] = []  # ahead of their slots' tasks
    client.service.subscribe(topics.job_events(job_id), lambda _t, message: moves.extend(
        e for e in p.job_events_in(message) if isinstance(e, p.ExecutionStateEvent)))
    client.submit(job, [], job_id=job_id)
    result = wait_result(client, job_id, 400)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert (result.finished, result.total) == (2001, 2001)
    wait_for(lambda: sum(e.new is ExecutionState.FINISHED for e in moves) >= 2001, 10,
             "every FINISHED event")
    finished = Counter((e.vertex_id, e.subtask) for e in moves
                       if e.new is ExecutionState.FINISHED)
    assert len(finished) == 2001 and set(finished.values()) == {1}, "each finished once"
    assert {e.attempt for e in moves} == {0}, "no subtask ran twice"
    written = [int(line) for f in sorted(out.glob("part-*")) for line in f.read_text().split()]
    assert sorted(written) == [3 * x for x in range(40)]


def test_waiting_for_a_job_lets_go_of_its_subscriptions(client, tmp_path) -> None:
    """A long-lived client waits for thousands of jobs; each wait once left two
    subscriptions behind for good (found by benchmarks/soak.py)."""
    job = tmp_path / "tiny.py"
    job.write_text("def build(env):\n    env.from_range(0, 3).collect()\n")
    job_id = client.submit(job, [])
    result = client.wait(job_id, on_progress=lambda _snapshot: None)
    assert result.status == JobStatus.FINISHED, result.root_cause
    assert [f for f, *_ in client.service._subscriptions if job_id in f] == []


def test_a_pyspark_script_with_arguments_prints_the_right_answer(client) -> None:
    result = run(client, EXAMPLES / "pi.py", "2", "20000")
    assert result.status == JobStatus.FINISHED, result.root_cause
    estimate = float(re.search(r"Pi is roughly ([0-9.]+)", result.stdout).group(1))
    assert estimate == pytest.approx(3.14159, abs=0.05)


def test_consumers_start_only_after_all_their_producers_finished(client, tmp_path) -> None:
    text_files(tmp_path / "words", files=6, lines=30, seed=11)
    events: list[p.ExecutionStateEvent] = []
    job_id = client.submit(EXAMPLES / "wordcount.py", [str(tmp_path / "words"), "3"])
    client.service.subscribe(topics.job_events(job_id), lambda _t, message: events.extend(
        e for e in p.job_events_in(message) if isinstance(e, p.ExecutionStateEvent)))
    result = client.wait(job_id)
    assert result.status == JobStatus.FINISHED, result.root_cause
    snapshot_vertices = {e.vertex_id for e in events}
    source, consumer = sorted(snapshot_vertices)
    last_producer_finished = max(e.at for e in events
                                 if e.vertex_id == source and e.new is ExecutionState.FINISHED)
    first_consumer_scheduled = min(e.at for e in events
                                   if e.vertex_id == consumer
                                   and e.new is ExecutionState.SCHEDULED)
    assert first_consumer_scheduled >= last_producer_finished


def test_cancelling_a_long_job_cancels_every_execution_and_frees_the_slots(
        client, cluster, tmp_path) -> None:
    _, watcher = cluster
    job = tmp_path / "slow.py"
    job.write_text("import time\n"
                   "def slow(x):\n"
                   "    time.sleep(0.5)\n"
                   "    return x\n"
                   "def build(env):\n"
                   "    env.set_parallelism(2)\n"
                   "    env.from_range(0, 4000).map(slow).collect()\n")
    job_id = client.submit(job, [])
    wait_for(lambda: any(j.job_id == job_id and j.status is JobStatus.RUNNING
                         for j in client.jobs().jobs), 60, "the slow job running")
    wait_for(lambda: watcher.latest.slots_free <= 2, 60, "its two tasks in their slots")
    cancelled_at = time.monotonic()
    client.cancel(job_id)
    result = client.wait(job_id)
    assert result.status == JobStatus.CANCELED
    assert time.monotonic() - cancelled_at < 30, "the Spark work did not stop"
    states: list[p.JobSnapshot] = []  # the retained snapshot: every execution's state
    client.service.subscribe(topics.job_state(job_id), lambda _t, s: states.append(s))
    wait_for(lambda: states, 10, "the job's retained snapshot")
    # A subtask may finish before the cancel: the source's splits are pulled in batches,
    # so the subtask that asks first can take them all and leave the other none.
    ended = [s.attempts[-1].state for v in states[-1].graph.vertices for s in v.subtasks]
    assert ExecutionState.CANCELED in ended
    assert set(ended) <= {ExecutionState.CANCELED, ExecutionState.FINISHED}
    wait_for(lambda: watcher.latest.slots_free == 4, 20, "all four slots free again")


@pytest.mark.parametrize(("source", "complaint"), [
    ("def build(env)\n    pass\n", "syntax error"),
    ("import no_such_module_here\ndef build(env):\n    pass\n", "no_such_module_here"),
    ("x = 1\n", "is not a job"),
    ("def build(env):\n    raise RuntimeError('broken on purpose')\n", "broken on purpose"),
    ("def build(env):\n    env.from_range(0, 3).map(lambda x: x, colour='red').collect()\n",
     "colour"),
])
def test_a_broken_job_file_is_rejected_with_a_clear_error(client, tmp_path, source,
                                                          complaint) -> None:
    job = tmp_path / "broken.py"
    job.write_text(source)
    with pytest.raises(JobLoadError) as caught:
        client.submit(job, [])
    assert complaint in caught.value.describe()


def test_a_failing_job_reports_its_root_cause_and_the_cluster_runs_the_next_job(
        client, tmp_path) -> None:
    failed = run(client, EXAMPLES / "failing_job.py")
    assert failed.status == JobStatus.FAILED
    cause = failed.root_cause
    assert cause["exception_type"] == "ValueError"
    assert "record 777 is bad" in cause["message"]
    assert "raise ValueError" in cause["traceback"]
    assert cause["vertex_id"] and cause["taskmanager_id"] and cause["attempt"] == 0
    assert failed.failures == 1 + 3  # the first try and the three restarts of fixed-delay
    job = tmp_path / "after.py"
    job.write_text("def build(env):\n    env.from_collection([1, 2, 3]).collect()\n")
    assert sorted(collected_rows(run(client, job))) == [1, 2, 3]


MALFORMED = [
    b"[" * 100_000 + b"]" * 100_000,                     # nested too deeply for Python
    b'{"v":1,"kind":"tell","id":' + b"9" * 5000 + b"}",  # an integer of 5,000 digits
    b'{"v":1,"kind":"tell","type":"CancelJob","body":{"job_id":1e400}}',
    b'{"v":1,"kind":"ask","from":"\\ud800","reply_to":"x","type":"RequestJobList"}',
    b'{"v":1,"kind":"\xff\xfe"}',
    b'{"v":1,"kind":"tell","type":"SubmitTask","body":{"job_id":[]}}',
    b'{"v":1,"kind":"event","type":"ClusterOverview","body":{"bogus":1}}',
    b"",
]


def test_a_submission_with_a_path_for_a_job_id_is_refused_and_leaves_nothing(client,
                                                                            cluster) -> None:
    """Sent as a raw SubmitJob, as a client of another make could: the Dispatcher checks
    the id, not only our client."""
    local_cluster, _ = cluster
    job = load_job(EXAMPLES / "wordcount.py", [str(EXAMPLES / "data" / "words"), "2"])
    store = paths.cluster_dir(local_cluster.cluster_id) / "jobs"
    stored = sorted(entry.name for entry in store.iterdir())
    request = p.SubmitJob("../../escape", job.graph, "no-upload", "0" * 64)
    with pytest.raises(RemoteError) as refused:
        client.dispatcher().submit_job(request).result()
    assert "job id" in refused.value.remote_message
    assert sorted(entry.name for entry in store.iterdir()) == stored
    assert not list(paths.data_dir().parent.rglob("escape*"))


def test_malformed_payloads_on_every_topic_leave_the_cluster_serving(client, cluster,
                                                                     tmp_path) -> None:
    """What the protocol never sends, on every topic the JobManager and the TaskManagers
    listen to: with the TaskManager login (the one handed to other machines; the broker
    drops what it may not send), then with the JobManager's, which reaches every parser."""
    local_cluster, _ = cluster
    layout = topics.layout(local_cluster.cluster_id)
    endpoints = ["dispatcher", "resourcemanager", "taskexecutor.taskmanager-1",
                 "taskexecutor.taskmanager-2"]
    senders = ("taskmanager-1", "jobmanager", "client")
    topics_hit = [topic for endpoint in endpoints for sender in senders
                  for topic in (layout.rpc(endpoint, sender), layout.heartbeat(endpoint, sender))]
    topics_hit += [layout.reply(service, sender) for sender in senders
                   for service in ("jobmanager", "taskmanager-1", "taskmanager-2")]
    topics_hit += [layout.absolute(t) for t in (topics.CLUSTER_STATE, topics.CLUSTER_EVENTS,
                                                topics.LEADER, "events/jobs/x",
                                                "state/jobs/x", topics.presence("jobmanager"))]
    restarts = {info.name: info.restarts for info in local_cluster.supervisor.processes()}
    for role in ("taskmanager", "jobmanager"):
        address = local_cluster.broker_address(role, "taskmanager-1")
        hostile = make_client(address, layout.client_id(f"hostile-{role}"))
        connect_and_wait(hostile, address, timeout=10)
        try:
            for topic in topics_hit:
                for payload in MALFORMED:
                    sent = hostile.publish(topic, payload, qos=1)
                    sent.wait_for_publish(10)
                    assert sent.is_published(), f"the broker took no payload on {topic}"
        finally:
            hostile.disconnect()
            hostile.loop_stop()
    assert isinstance(client.jobs(), p.JobList)
    expected = text_files(tmp_path / "words", files=3, lines=20, seed=11)
    result = run(client, EXAMPLES / "wordcount.py", str(tmp_path / "words"), "2")
    assert result.status == "FINISHED", result.root_cause
    assert counts(result) == expected
    assert {info.name: info.restarts
            for info in local_cluster.supervisor.processes()} == restarts


def clusterdeck(cluster, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    local_cluster, _ = cluster
    command, *rest = args
    return subprocess.run([sys.executable, "-m", "clusterdeck.core.cli", command, "--cluster",
                           local_cluster.cluster_id, *rest], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_a_script_that_prints_a_megabyte_finishes_and_submit_prints_all_of_it(
        cluster, tmp_path) -> None:
    """Its output is four frames' worth: it travels in files, the messages carry its end."""
    script = tmp_path / "chatty.py"
    script.write_text("import sys\n"
                      "from pyspark.sql import SparkSession\n"
                      "spark = SparkSession.builder.getOrCreate()\n"
                      "for i in range(spark.range(0, 20000).count()):\n"
                      "    print(f'line {i:06d} ' + 'x' * 40)\n"
                      "print('the end, on stderr', file=sys.stderr)\n")
    done = clusterdeck(cluster, "submit", str(script))
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [line for line in done.stdout.splitlines() if line.startswith("line ")]
    assert printed == [f"line {i:06d} " + "x" * 40 for i in range(20000)]
    assert len(done.stdout) > 1_000_000
    assert "the end, on stderr" in done.stderr


def test_submit_shows_what_a_script_prints_while_it_runs_then_all_of_it_once(
        cluster, tmp_path) -> None:
    """As spark-submit shows a program's output: the first line reaches the submitter
    while the script still runs (it waits for a file the test writes only once it saw
    that line), then a megabyte more, each line once and in order."""
    local_cluster, _ = cluster
    script, gate = tmp_path / "live.py", tmp_path / "gate"
    script.write_text("import os, sys, time\n"
                      "import pyspark\n"
                      "print('first line', flush=True)\n"
                      "print('first warning', file=sys.stderr)\n"
                      "deadline = time.monotonic() + 120\n"
                      f"while not os.path.exists({str(gate)!r}) and time.monotonic() < deadline:\n"
                      "    time.sleep(0.05)\n"
                      "for i in range(20000):\n"
                      "    print(f'line {i:06d} ' + 'x' * 40)\n")
    submitter = subprocess.Popen(
        [sys.executable, "-m", "clusterdeck.core.cli", "submit", "--cluster",
         local_cluster.cluster_id, str(script)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    errors: list[str] = []
    readers = [threading.Thread(target=lambda: lines.extend(submitter.stdout), daemon=True),
               threading.Thread(target=lambda: errors.extend(submitter.stderr), daemon=True)]
    try:
        for reader in readers:
            reader.start()
        wait_for(lambda: "first line\n" in lines, 120, "the first line, while it runs")
        assert submitter.poll() is None
        wait_for(lambda: "first warning\n" in errors, 30, "its stderr, while it runs")
        gate.touch()
        assert submitter.wait(180) == 0, "".join(errors)[-3000:]
    finally:
        submitter.kill()
    for reader in readers:
        reader.join(30)
    assert lines[0] == "first line\n"
    assert [line for line in lines if line.startswith("line ")] == [
        f"line {i:06d} " + "x" * 40 + "\n" for i in range(20000)]
    assert errors.count("first warning\n") == 1


def test_an_update_too_large_to_send_fails_its_attempt_with_the_limit_named(client,
                                                                            tmp_path) -> None:
    """6,000 counters of 50-character names: the finished update is larger than a frame.
    The attempt fails with a cause that says so, instead of the job waiting for ever."""
    job = tmp_path / "counted.py"
    job.write_text("def build(env):\n"
                   "    counters = [env.counter(f'{i:06d}' + 'c' * 44) for i in range(6000)]\n"
                   "    def touch(x):\n"
                   "        for counter in counters:\n"
                   "            counter.add(1)\n"
                   "        return x\n"
                   "    env.from_collection([1]).map(touch).collect()\n")
    result = wait_result(client, client.submit(
        job, (), restart_strategy={"restart-strategy.type": "none"}), 240)
    assert result.status == "FAILED"
    assert result.root_cause is not None
    assert result.root_cause["exception_type"] == "FrameTooLargeError"
    assert "rpc.framesize" in result.root_cause["message"]


def test_submit_prints_progress_and_the_scripts_output_and_exits_0(cluster) -> None:
    done = clusterdeck(cluster, "submit", str(EXAMPLES / "pi.py"), "--", "2", "5000")
    assert done.returncode == 0, done.stderr
    assert "Pi is roughly" in done.stdout
    assert "1/1 subtasks" in done.stderr
    assert "FINISHED" in done.stderr


def test_submit_exit_codes_tell_a_failed_job_from_a_rejected_one(cluster, tmp_path) -> None:
    failed = clusterdeck(cluster, "submit", str(EXAMPLES / "failing_job.py"))
    assert failed.returncode == 1
    assert "root cause" in failed.stderr and "record 777 is bad" in failed.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("def build(env)\n")
    rejected = clusterdeck(cluster, "submit", str(broken))
    assert rejected.returncode == 4
    assert "syntax error" in rejected.stderr


RELATIVE_SCRIPT = """\
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
with open("data/people.txt") as people:
    python_rows = people.read().split()
spark_rows = [row.value for row in spark.read.text("data/people.txt").collect()]
partitions = spark.conf.get("spark.sql.shuffle.partitions")
print("argv", sys.argv)
print("python", python_rows, "spark", spark_rows, "partitions", partitions)
if python_rows != ["ada", "lin"] or spark_rows != python_rows or partitions != "3":
    sys.exit(1)
sys.exit(3)
"""


def test_a_script_submitted_from_its_own_folder_runs_there_as_spark_submit_would(
        cluster, tmp_path) -> None:
    """Relative paths (open() and spark.read) resolve in the folder submit ran in, not
    the cluster's; --conf reaches the script's session; its exit status is submit's."""
    submitter = tmp_path / "project"
    (submitter / "data").mkdir(parents=True)
    (submitter / "data" / "people.txt").write_text("ada\nlin\n")
    script = tmp_path / "scripts" / "relative.py"
    script.parent.mkdir()
    script.write_text(RELATIVE_SCRIPT)
    # The folder is new: the cluster's processes started elsewhere, before it existed.
    done = clusterdeck(cluster, "submit", "--restart-strategy", "none",
                       "--conf", "spark.sql.shuffle.partitions=3", str(script), "--", "x", "y",
                       cwd=submitter)
    assert done.returncode == 3, done.stdout + done.stderr[-3000:]
    assert f"argv {[str(script), 'x', 'y']}" in done.stdout
    assert "python ['ada', 'lin'] spark ['ada', 'lin'] partitions 3" in done.stdout
    assert "root cause in vertex-1 subtask 0" in done.stderr
    assert "SystemExit: 3" in done.stderr


def test_detached_submit_prints_the_job_id_and_list_shows_it(cluster) -> None:
    detached = clusterdeck(cluster, "submit", "--detached", str(EXAMPLES / "pi.py"), "--",
                           "1", "1000")
    assert detached.returncode == 0, detached.stderr
    job_id = detached.stdout.strip()
    wait_for(lambda: any(j["job_id"] == job_id and j["status"] == "FINISHED" for j in
                         json.loads(clusterdeck(cluster, "list", "--json").stdout)), 120,
             "the detached job finished in the list")
    result = clusterdeck(cluster, "result", job_id, "--json")
    assert json.loads(result.stdout)["status"] == "FINISHED"
