"""The job layer on a real Spark, in this process: every vertex's subtasks run through
``run_subtask`` (``run_local``), and every result is checked against plain Python.

The session's one SparkSession (local[2], tests/conftest.py) serves the module.
"""

from __future__ import annotations

import csv
import gzip
import os
import random
import re
import shutil
import textwrap
import threading
from collections import Counter
from pathlib import Path

import pytest

from clusterdeck.core.engine.exchange import InputPartition, PartitionNotFound
from clusterdeck.core.engine.local import run_local
from clusterdeck.core.engine.runtime import cancel_subtask, run_subtask
from clusterdeck.core.engine.tally import LiveCounts
from clusterdeck.core.jobapi.artifact import pack_artifact, unpack_artifact
from clusterdeck.core.jobapi.errors import SubtaskCancelled, SubtaskFailed
from clusterdeck.core.jobapi.inputsplits import plan_splits
from clusterdeck.core.jobapi.loader import LoadedJob, load_job
from clusterdeck.core.protocol.wiring import ResultPartitionRef
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORD = re.compile(r"[a-z']+")


def job_file(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def through_artifact(path: Path, args: list[str], folder: Path) -> LoadedJob:
    """Load a job the way a TaskManager does: from its unpacked artifact, bound to the
    graph the client built."""
    submitted = load_job(path, args).graph
    artifact = pack_artifact(path)
    entry = unpack_artifact(artifact.data, folder / "artifact", artifact.sha256)
    return load_job(entry, args, expected=submitted)


def words_in(files: list[Path]) -> tuple[Counter, int]:
    counts: Counter = Counter()
    lines = 0
    for path in files:
        for line in path.read_text().splitlines():
            lines += 1
            counts.update(WORD.findall(line.lower()))
    return counts, lines


@pytest.mark.parametrize("parallelism", [1, 3, 4])
def test_word_count_over_many_small_files_matches_python(spark, tmp_path, parallelism):
    data = EXAMPLES / "data" / "words"
    expected, lines = words_in(sorted(data.glob("*.txt")))
    job = through_artifact(EXAMPLES / "wordcount.py", [str(data), str(parallelism)], tmp_path)
    result = run_local(job, spark, tmp_path / "work")

    assert Counter(dict(map(tuple, result.rows()))) == expected
    assert result.counters == {"lines": lines}
    source, counter = (v.id for v in job.graph.vertices)
    assert result.records(source) == (lines, sum(expected.values()))
    # The producers combine before the exchange: the counter reads at most one partial
    # count per word and producer partition, not every word.
    combined, counted = result.records(counter)
    assert len(expected) <= combined < sum(expected.values())
    assert counted == len(expected)
    assert len([r for r in result.subtasks if r.vertex_id == source]) == parallelism


def big_text(path: Path, lines: int) -> None:
    rng = random.Random(5)
    vocabulary = ["spark", "flink", "slot", "vertex", "héllo", "mailbox", "split", "x" * 30]
    path.write_text("\n".join(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 9)))
                              for _ in range(lines)) + "\n", encoding="utf-8")


def test_word_count_over_one_big_file_cut_into_blocks_reads_every_line_once(spark, tmp_path):
    big = tmp_path / "big.txt"
    big_text(big, 3000)
    expected, lines = words_in([big])
    job = load_job(EXAMPLES / "wordcount.py", [str(big), "3"])
    splits = plan_splits(job.graph.vertices[0], block_size=16 * 1024)
    assert len(splits) > 5 and all(split.length > 0 for split in splits)

    result = run_local(job, spark, tmp_path / "work", block_size=16 * 1024,
                       split_batch_bytes=40 * 1024)

    assert Counter(dict(map(tuple, result.rows()))) == expected
    assert result.counters == {"lines": lines}
    source = job.graph.vertices[0].id
    assert result.records(source)[0] == lines
    read = sorted(i for r in result.subtasks if r.vertex_id == source for i in r.splits)
    assert read == [split.split_id for split in splits]


def test_the_lines_of_a_file_cut_into_blocks_each_arrive_once(spark, tmp_path):
    big = tmp_path / "lines.txt"
    big_text(big, 2000)
    path = job_file(tmp_path, "lines.py", f"""
        def build(env):
            env.read_text({str(big)!r}, parallelism=3).collect()
    """)
    result = run_local(load_job(path), spark, tmp_path / "work", block_size=8 * 1024)
    assert Counter(result.rows()) == Counter(big.read_text(encoding="utf-8").splitlines())


def test_live_counts_grow_while_a_subtask_runs_and_end_at_its_result(spark, tmp_path):
    """What the window's live numbers are made of (core/engine/tally.py): the records read
    grow as Spark's tasks end, before the subtask does, and end equal to its result."""
    big = tmp_path / "lines.txt"
    big_text(big, 1600)
    path = job_file(tmp_path, "slow_lines.py", f"""
        import time

        def slow(line):
            time.sleep(0.002)
            return line

        def build(env):
            env.read_text({str(big)!r}, parallelism=1).map(slow).collect()
    """)
    job = load_job(path)
    splits = plan_splits(job.graph.vertices[0], block_size=4 * 1024)
    assert len(splits) > 8
    counts = LiveCounts()
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(run_subtask(
        spark, job, "vertex-1", 0, "live-attempt", [], iter(splits), tmp_path / "out",
        counts=counts)), daemon=True)
    worker.start()
    seen = wait_for(lambda: worker.is_alive() and 0 < counts.now()[0] < 1600 and counts.now(),
                    60, "records read so far, before the end")
    worker.join(timeout=120)
    [result] = outcome
    assert seen[0] < result.records_in == 1600
    assert counts.now()[:2] == (result.records_in, result.records_out)
    assert counts.now()[2] == big.stat().st_size  # bytes read: every block once


def read_csv(name: str) -> list[dict[str, str]]:
    with open(EXAMPLES / "data" / name, newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_join_of_two_csv_files_matches_python(spark, tmp_path):
    users = {int(u["user_id"]): u for u in read_csv("users.csv")}
    expected = sorted((int(o["order_id"]), int(o["user_id"]), float(o["amount"]),
                       users[int(o["user_id"])]["name"], users[int(o["user_id"])]["country"])
                      for o in read_csv("orders.csv") if int(o["user_id"]) in users)
    result = run_local(load_job(EXAMPLES / "join_csv.py"), spark, tmp_path / "work")
    rows = result.rows()
    assert sorted((r["order_id"], r["user_id"], r["amount"], r["name"], r["country"])
                  for r in rows) == expected


def test_the_sql_aggregate_matches_python_in_its_order(spark, tmp_path):
    country = {int(u["user_id"]): u["country"] for u in read_csv("users.csv")}
    revenue: Counter = Counter()
    orders: Counter = Counter()
    for order in read_csv("orders.csv"):
        if int(order["user_id"]) in country:
            revenue[country[int(order["user_id"])]] += float(order["amount"])
            orders[country[int(order["user_id"])]] += 1
    result = run_local(load_job(EXAMPLES / "sql_aggregate.py"), spark, tmp_path / "work")
    rows = result.rows()
    assert [row["country"] for row in rows] == sorted(revenue, key=revenue.get, reverse=True)
    for row in rows:
        assert row["orders"] == orders[row["country"]]
        assert row["revenue"] == pytest.approx(revenue[row["country"]], abs=0.01)


def test_collect_returns_every_row_as_json(spark, tmp_path):
    path = job_file(tmp_path, "squares.py", """
        def build(env):
            env.set_parallelism(3)
            env.from_range(0, 3000).map(lambda x: (x, x * x)).collect()
    """)
    result = run_local(load_job(path), spark, tmp_path / "work")
    assert result.rows() == [[x, x * x] for x in range(3000)]
    assert [r.records_out for r in result.subtasks] == [1000, 1000, 1000]


@pytest.mark.parametrize("source, parallelism, expected", [
    ("env.from_range(0, 3, parallelism=8)", 8, [0, 10, 20]),
    ("env.from_collection([1, 2], parallelism=5)", 5, [10, 20])])
def test_subtasks_beyond_the_elements_read_empty_parts_without_a_spark_job(
        spark, tmp_path, source, parallelism, expected):
    """Each part of a range or collection is its subtask's: with more subtasks than
    elements, the others get empty parts and start no Spark job for them."""
    path = job_file(tmp_path, "sparse.py", f"""
        def build(env):
            {source}.map(lambda x: x * 10).collect()
    """)
    result = run_local(load_job(path), spark, tmp_path / "work")
    assert sorted(result.rows()) == expected
    sources = [r for r in result.subtasks if r.vertex_id == result.subtasks[0].vertex_id]
    assert len(sources) == parallelism  # the collect() behind them is a vertex of its own
    tracker = spark.sparkContext.statusTracker()
    spark_jobs = {r.attempt_id: len(tracker.getJobIdsForGroup(r.attempt_id)) for r in sources}
    empty = [r.attempt_id for r in sources if r.records_out == 0]
    assert len(empty) == parallelism - len(expected)
    assert [spark_jobs[a] for a in empty] == [0] * len(empty)
    assert all(spark_jobs[r.attempt_id] > 0 for r in sources if r.records_out)


PEOPLE = [{"name": f"p{i}", "city": ["Oslo", "Lima", "Pune", "Kyiv"][i % 4], "age": 20 + i % 37}
          for i in range(200)]


def test_a_keyed_reduce_and_a_broadcast_join_over_python_records(spark, tmp_path):
    out = tmp_path / "oldest"
    path = job_file(tmp_path, "people.py", f"""
        PEOPLE = {PEOPLE!r}

        def oldest(a, b):
            return a if (a["age"], a["name"]) >= (b["age"], b["name"]) else b

        def build(env):
            env.set_parallelism(2)
            people = env.from_collection(PEOPLE, name="people")
            cities = env.from_collection([{{"city": "Oslo", "country": "NO"}},
                                          {{"city": "Lima", "country": "PE"}}],
                                         parallelism=1, name="cities")
            people.key_by(lambda p: p["city"]).reduce(oldest).write_text({str(out)!r})
            people.join(cities.broadcast(), on="city").collect(name="joined")
    """)
    result = run_local(load_job(path), spark, tmp_path / "work")

    oldest = {}
    for person in PEOPLE:
        best = oldest.get(person["city"])
        if best is None or (person["age"], person["name"]) >= (best["age"], best["name"]):
            oldest[person["city"]] = person
    lines = [line for f in sorted(out.glob("part-*.txt")) for line in f.read_text().splitlines()]
    assert sorted(lines) == sorted(str(p) for p in oldest.values())
    assert not (out / "_attempts").exists()
    joined = result.rows("op-6")
    assert sorted((r["name"], r["country"]) for r in joined) == sorted(
        (p["name"], {"Oslo": "NO", "Lima": "PE"}[p["city"]]) for p in PEOPLE
        if p["city"] in ("Oslo", "Lima"))


def test_a_batch_process_function_keeps_each_keys_value_across_its_records(spark, tmp_path):
    out = tmp_path / "repeats"
    path = job_file(tmp_path, "repeats.py", f"""
        def repeats(word, state):
            seen = (state.value() or 0) + 1
            state.update(seen)
            if seen == 2:
                yield (state.key, "again")

        def build(env):
            env.set_parallelism(2)
            words = env.from_collection("a b a c b a d".split(), name="words")
            words.key_by(lambda w: w.upper()).process(repeats).write_text({str(out)!r})
    """)
    run_local(load_job(path), spark, tmp_path / "work")
    lines = [line for f in sorted(out.glob("part-*.txt")) for line in f.read_text().splitlines()]
    assert sorted(lines) == [str(("A", "again")), str(("B", "again"))]


def test_table_operators_keep_columns_into_parquet_and_csv_sinks(spark, tmp_path):
    out = tmp_path / "out"
    path = job_file(tmp_path, "orders.py", f"""
        def build(env):
            orders = env.read_csv({str(EXAMPLES / "data" / "orders.csv")!r},
                                  schema="order_id INT, user_id INT, amount DOUBLE")
            big = orders.filter(lambda order: order.amount > 100, name="big")
            (big.key_by("user_id")
                .aggregate({{"orders": ("*", "count"), "total": ("amount", "sum")}},
                           parallelism=2)
                .write_parquet({str(out / "totals")!r}))
            big.key_by("user_id").count(parallelism=2).write_csv({str(out / "counts")!r})
    """)
    run_local(load_job(path), spark, tmp_path / "work")

    expected: dict[int, list[float]] = {}
    for order in read_csv("orders.csv"):
        if float(order["amount"]) > 100:
            expected.setdefault(int(order["user_id"]), []).append(float(order["amount"]))
    totals = {row.user_id: (row.orders, row.total)
              for row in spark.read.parquet(str(out / "totals")).collect()}
    assert totals == {user: (len(a), pytest.approx(sum(a))) for user, a in expected.items()}
    counts = {int(row["_1"]): int(row["_2"])
              for row in spark.read.csv(str(out / "counts"), header=True).collect()}
    assert counts == {user: len(a) for user, a in expected.items()}


def test_pi_runs_unmodified_with_its_arguments_and_its_stop_leaves_spark_running(spark,
                                                                                 tmp_path):
    result = run_local(load_job(EXAMPLES / "pi.py", ["2", "20000"]), spark, tmp_path / "work")
    estimate = float(re.search(r"Pi is roughly ([0-9.]+)", result.stdout).group(1))
    assert estimate == pytest.approx(3.14159, abs=0.05)
    assert spark.range(5).count() == 5


def test_a_failing_script_fails_with_its_traceback_and_output(spark, tmp_path):
    path = job_file(tmp_path, "fails.py", """
        import sys
        from pyspark import SparkConf, SparkContext

        def check(n):
            if n > 2:
                raise ValueError(f"too big: {n}")

        if __name__ == "__main__":
            sc = SparkContext(conf=SparkConf().setAppName("fails"))
            print("counted", sc.parallelize(range(5)).count(), "args", sys.argv[1:])
            sc.stop()
            check(int(sys.argv[1]))
    """)
    job = load_job(path, ["7"])
    with pytest.raises(SubtaskFailed) as caught:
        run_subtask(spark, job, "vertex-1", 0, "script-attempt", [], iter(()), tmp_path / "out")
    failure = caught.value
    assert failure.message == "ValueError: too big: 7"
    assert failure.stdout == "counted 5 args ['7']\n"
    assert 'fails.py", line 7, in check' in failure.traceback_text
    assert "ValueError: too big: 7" in failure.stderr
    exits = job_file(tmp_path, "exits.py", """
        import sys
        import pyspark
        if __name__ == "__main__":
            print("giving up", file=sys.stderr)
            sys.exit(3)
    """)
    with pytest.raises(SubtaskFailed, match="SystemExit: 3") as caught:
        run_subtask(spark, load_job(exits), "vertex-1", 0, "exit-attempt", [], iter(()),
                    tmp_path / "out")
    assert caught.value.stderr == "giving up\n"
    assert caught.value.exit_code == 3
    assert spark.sparkContext.parallelize(range(3)).count() == 3


def test_a_failing_subtask_reports_the_users_traceback(spark, tmp_path):
    with pytest.raises(SubtaskFailed) as caught:
        run_local(load_job(EXAMPLES / "failing_job.py"), spark, tmp_path / "work")
    failure = caught.value
    assert (failure.vertex_id, failure.subtask_index) == ("vertex-1", 3)
    assert failure.message == "ValueError: record 777 is bad"
    assert 'failing_job.py", line 12, in check' in failure.traceback_text
    assert "pyspark" not in failure.traceback_text


def test_cancel_stops_a_long_running_subtask(spark, tmp_path):
    path = job_file(tmp_path, "slow.py", """
        import time

        def slow(x):
            time.sleep(0.05)
            return x

        def build(env):
            env.from_range(0, 100000).map(slow).collect()
    """)
    job = load_job(path)
    [split] = plan_splits(job.graph.vertices[0])
    outcome: list[BaseException] = []

    def subtask() -> None:
        try:
            run_subtask(spark, job, "vertex-1", 0, "slow-attempt", [], iter([split]),
                        tmp_path / "out")
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=subtask, daemon=True)
    worker.start()
    tracker = spark.sparkContext.statusTracker()
    wait_for(lambda: tracker.getJobIdsForGroup("slow-attempt"), 60, "the slow Spark job")
    cancel_subtask(spark, "slow-attempt")
    worker.join(timeout=30)
    assert not worker.is_alive(), "the subtask did not stop"
    assert len(outcome) == 1 and isinstance(outcome[0], SubtaskCancelled)
    wait_for(lambda: not [j for j in tracker.getJobIdsForGroup("slow-attempt")
                          if tracker.getJobInfo(j).status == "RUNNING"], 10,
             "no Spark job of the attempt running")


def test_two_scripts_on_two_threads_keep_their_own_output_and_arguments(spark, tmp_path):
    path = job_file(tmp_path, "echo.py", """
        import sys
        from pyspark.sql import SparkSession

        if __name__ == "__main__":
            spark = SparkSession.builder.getOrCreate()
            spark.conf.set("spark.sql.shuffle.partitions", sys.argv[1])
            total = spark.range(int(sys.argv[1]) * 10).groupBy().sum().collect()[0][0]
            print(sys.argv[1:], total, spark.conf.get("spark.sql.shuffle.partitions"))
            spark.stop()
    """)
    results: dict[str, object] = {}

    def script(argument: str) -> None:
        job = load_job(path, [argument])
        results[argument] = run_subtask(spark, job, "vertex-1", 0, f"echo-{argument}", [],
                                        iter(()), tmp_path / argument)

    threads = [threading.Thread(target=script, args=(a,)) for a in ("3", "5")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results["3"].stdout == "['3'] 435 3\n"
    assert results["5"].stdout == "['5'] 1225 5\n"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


READS_RELATIVE = """
    import os
    import sys
    import time
    from pyspark.sql import SparkSession

    if __name__ == "__main__":
        spark = SparkSession.builder.getOrCreate()
        ready, other = sys.argv[1:3]
        open(ready, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(other) and time.monotonic() < deadline:
            time.sleep(0.01)  # both scripts in their folders at once
        with open("data/lines.txt") as lines:
            python_lines = lines.read().splitlines()
        spark_lines = [row.value for row in spark.read.text("data/lines.txt").collect()]
        rdd_lines = spark.sparkContext.textFile("data/lines.txt").collect()
        written = spark.createDataFrame([(line,) for line in python_lines], "v string")
        written.write.mode("overwrite").csv("written")
        print(os.getcwd(), sys.argv[0], python_lines, spark_lines, rdd_lines)
"""


def submitter_folder(root: Path, name: str) -> Path:
    folder = root / name
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "lines.txt").write_text(f"{name} 1\n{name} 2\n")
    return folder


def test_two_scripts_submitted_from_two_folders_read_and_write_relative_paths_there_at_once(
        spark, tmp_path):
    """open(), spark.read, sc.textFile and a writer resolve against each script's own
    submitter folder, while both run side by side, and the process stays where it was."""
    (tmp_path / "scripts").mkdir()
    path = job_file(tmp_path / "scripts", "read.py", READS_RELATIVE)
    folders = {name: submitter_folder(tmp_path, name) for name in ("a", "b")}
    ready = {name: str(tmp_path / f"{name}.ready") for name in folders}
    process_cwd = os.getcwd()
    results: dict[str, object] = {}

    def script(name: str, other: str) -> None:
        job = load_job(path, [ready[name], ready[other]], cwd=str(folders[name]))
        results[name] = run_subtask(spark, job, "vertex-1", 0, f"read-{name}", [], iter(()),
                                    tmp_path / name / "out")

    threads = [threading.Thread(target=script, args=pair) for pair in (("a", "b"), ("b", "a"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for name, folder in folders.items():
        lines = [f"{name} 1", f"{name} 2"]
        assert results[name].stdout == f"{folder} {path} {lines} {lines} {lines}\n"
        written = spark.read.csv(str(folder / "written")).collect()
        assert sorted(row[0] for row in written) == lines
    assert os.getcwd() == process_cwd


def test_a_submitter_folder_this_machine_does_not_see_runs_the_script_with_a_warning(
        spark, tmp_path):
    path = job_file(tmp_path, "where.py", """
        import os
        import pyspark
        print(os.getcwd())
    """)
    job = load_job(path, cwd=str(tmp_path / "on-another-machine"))
    result = run_subtask(spark, job, "vertex-1", 0, "where-attempt", [], iter(()),
                         tmp_path / "out")
    assert result.stdout == f"{os.getcwd()}\n"
    assert result.stderr.startswith(
        f"clusterdeck: warning: the working directory it was submitted from, "
        f"{tmp_path / 'on-another-machine'}, is not readable on this TaskManager")


CONF_SCRIPT = """
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    spark = SparkSession.builder.getOrCreate()
    counted = spark.range(10).groupBy(F.col("id") % 5).count()
    print(spark.conf.get("spark.sql.shuffle.partitions"),
          spark.conf.get("spark.myapp.mode", "unset"),
          spark.conf.get("spark.sql.adaptive.enabled"), counted.rdd.getNumPartitions())
"""


def test_conf_settings_reach_the_script_warn_when_fixed_and_leave_the_next_job_alone(
        spark, tmp_path):
    path = job_file(tmp_path, "conf.py", CONF_SCRIPT)
    job = load_job(path, spark_conf={"spark.sql.shuffle.partitions": "3",
                                     "spark.sql.adaptive.enabled": "false",
                                     "spark.myapp.mode": "fast",
                                     "spark.executor.memory": "4g"})
    result = run_subtask(spark, job, "vertex-1", 0, "conf-attempt", [], iter(()),
                         tmp_path / "out")
    assert result.stdout == "3 fast false 3\n"
    assert result.stderr.startswith("clusterdeck: warning: --conf spark.executor.memory=4g "
                                    "is not applied")
    after = run_subtask(spark, load_job(path), "vertex-1", 0, "after-attempt", [], iter(()),
                        tmp_path / "out")
    assert after.stdout.startswith("2 unset true ")
    assert after.stderr == ""


def test_a_conf_value_spark_refuses_fails_the_script_before_it_runs(spark, tmp_path):
    path = job_file(tmp_path, "conf.py", CONF_SCRIPT)
    job = load_job(path, spark_conf={"spark.sql.shuffle.partitions": "many"})
    with pytest.raises(SubtaskFailed) as caught:
        run_subtask(spark, job, "vertex-1", 0, "bad-conf-attempt", [], iter(()),
                    tmp_path / "out")
    assert caught.value.message.startswith(
        "SparkConfError: --conf spark.sql.shuffle.partitions=many: ")
    assert caught.value.stdout == ""


def test_a_batch_of_many_range_parts_reads_each_number_once(spark):
    from clusterdeck.core.engine.sources import RANGES_UNIONED, _range
    from clusterdeck.core.engine.streams import Work
    from clusterdeck.core.protocol.jobgraph import InputSplit

    taken = [part for part in range(0, 300, 3)] + [299]  # 101 intervals, not adjacent
    assert len(taken) > RANGES_UNIONED
    splits = [InputSplit(i, "v", part=part, parts=300) for i, part in enumerate(taken)]
    batch = _range(Work(spark, "range-parts", lambda: False), {"start": 10, "end": 1210},
                   None, splits)
    values = sorted(row[0] for row in batch.stream.df.collect())
    assert values == sorted(10 + 4 * part + i for part in taken for i in range(4))
    assert batch.records() == len(values)


def test_an_empty_input_partition_reads_as_empty_and_a_missing_one_fails_the_consumer(
        spark, tmp_path):
    path = job_file(tmp_path, "sums.py", """
        def build(env):
            (env.from_collection([("a", 1), ("a", 2), ("a", 3)], name="pairs", parallelism=1)
                .key_by(0).sum(1, name="sum", parallelism=3).collect(name="out"))
    """)
    job = load_job(path)
    result = run_local(job, spark, tmp_path / "work")
    assert [tuple(row) for row in result.rows()] == [("a", 6)]  # two partitions were empty

    source, consumer = (vertex.id for vertex in job.graph.vertices)
    (producer,) = [r for r in result.subtasks if r.vertex_id == source]
    (written,) = [p for p in producer.partitions if list(Path(p.path).glob("*.parquet"))]
    shutil.rmtree(written.path)  # as if written where this machine cannot see
    inputs = [[InputPartition(written.path, consumer, 0, ResultPartitionRef(
        producer.attempt_id, source, 0, written.partition, "tm-elsewhere"))]]
    with pytest.raises(PartitionNotFound) as caught:
        run_subtask(spark, job, consumer, written.partition, "consumer-again", inputs,
                    iter(()), tmp_path / "again")
    assert caught.value.lost_producers == (producer.attempt_id,)
    assert (f"partition {written.partition} of input 0 of {consumer} at {written.path}, "
            f"written by {source}[0] (attempt {producer.attempt_id} on TaskManager "
            f"tm-elsewhere): its folder does not exist") in caught.value.message


SMALL_CHAINS = {
    "range, map, flat_map, filter, text": """
        def build(env):
            seen = env.counter("seen")
            def count(x):
                seen.add(1)
                return x
            env.set_parallelism(4)
            (env.from_range(5, 45).map(count).flat_map(lambda x: [x, -x])
             .filter(lambda x: x % 3).map(lambda x: f"n {x}").write_text(env.args[0]))
    """,
    "collection of tuples, map, collect": """
        def build(env):
            env.set_parallelism(3)
            items = [("a", 1), ("b", 2), ("c", None), ("d", 4.5)] * 5
            env.from_collection(items).map(lambda kv: {"k": kv[0], "v": kv[1]}).collect()
    """,
    "range straight into text": """
        def build(env):
            env.from_range(0, 7, parallelism=2).write_text(env.args[0])
    """,
}


def _outcome(result, out: Path) -> tuple:
    lines = sorted(line for f in sorted(out.glob("part-*")) for line in
                   f.read_text().splitlines()) if out.exists() else []
    rows = sorted(map(repr, result.rows())) if result.collected else []
    per_subtask = [(r.records_in, r.records_out) for r in result.subtasks]
    return lines, rows, per_subtask, result.counters


@pytest.mark.parametrize("chain", sorted(SMALL_CHAINS))
def test_a_small_subtask_gives_the_same_result_with_and_without_spark(spark, tmp_path,
                                                                       chain):
    """Local execution (localexecution.py) against the Spark path of the same job:
    the same lines or rows, records in and out per subtask, and counters."""
    path = job_file(tmp_path, "small.py", SMALL_CHAINS[chain])
    outcomes = []
    for local_max in (0, 1000):
        out = tmp_path / f"out-{local_max}"
        result = run_local(load_job(path, [str(out)]), spark, tmp_path / f"work-{local_max}",
                           local_max_records=local_max)
        outcomes.append(_outcome(result, out))
    assert outcomes[0] == outcomes[1]
    lines, rows, _per_subtask, counters = outcomes[1]
    assert lines or rows
    if "seen" in counters:
        assert counters == {"seen": 40}


def test_a_small_subtask_that_raises_fails_with_the_users_exception(spark, tmp_path):
    path = job_file(tmp_path, "bad.py", """
        def check(x):
            if x == 3:
                raise ValueError(f"record {x} is bad")
            return x

        def build(env):
            env.set_parallelism(4)
            env.from_range(0, 8).map(check).collect()
    """)
    with pytest.raises(SubtaskFailed) as caught:
        run_local(load_job(path), spark, tmp_path / "work")
    assert (caught.value.subtask_index, caught.value.message) == (1, "ValueError: record 3 is bad")
    assert 'bad.py", line 4, in check' in caught.value.traceback_text
    # from the user's frame on, as from a Spark worker: not the runtime calling it in place
    assert "localexecution.py" not in caught.value.traceback_text


def test_more_records_than_the_local_limit_run_on_spark(spark, tmp_path):
    """Above the limit a subtask takes the Spark path: it starts Spark jobs in its job
    group (seen by Spark's status tracker), where a small one starts none."""
    path = job_file(tmp_path, "sized.py", """
        def build(env):
            env.from_range(0, int(env.args[0]), parallelism=1).map(lambda x: x + 1).collect()
    """)
    tracker = spark.sparkContext.statusTracker()
    for size, spark_jobs in ((10, False), (11, True)):
        result = run_local(load_job(path, [str(size)]), spark, tmp_path / f"w{size}",
                           local_max_records=10)
        [subtask] = [r for r in result.subtasks if r.vertex_id == "vertex-1"]
        assert sorted(result.rows()) == list(range(1, size + 1))
        assert bool(tracker.getJobIdsForGroup(subtask.attempt_id)) is spark_jobs


def test_small_text_files_give_the_same_result_with_and_without_spark(spark, tmp_path):
    """Many small files, one subtask each, read here (localexecution.small_text) or by
    Spark's text reader: the same lines, records in and out; a compressed file among
    them goes to Spark either way."""
    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(6):
        (folder / f"f{index}.txt").write_bytes(
            f"line {index} one\r\nline {index} two\rlast é {index}\n".encode())
    with gzip.open(folder / "f6.txt.gz", "wt") as packed:
        packed.write("packed one\npacked two\n")
    path = job_file(tmp_path, "texts.py", """
        def build(env):
            env.set_parallelism(7)
            (env.read_text(env.args[1]).flat_map(lambda line: [line, line.upper()])
             .filter(lambda line: "TWO" not in line).write_text(env.args[0]))
    """)
    outcomes = []
    for local_max in (0, 1000):
        out = tmp_path / f"out-{local_max}"
        result = run_local(load_job(path, [str(out), str(folder)]), spark,
                           tmp_path / f"work-{local_max}", local_max_records=local_max)
        outcomes.append(_outcome(result, out))
    assert outcomes[0] == outcomes[1]
    lines = outcomes[1][0]
    assert len(lines) == 6 * 3 * 2 - 6 + 3 and "LAST É 3" in lines and "PACKED ONE" in lines, lines
