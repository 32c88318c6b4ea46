"""What the run changes before it runs (no Spark session): the job's sinks and a
script's arguments point into the folder, and messages compare without folders."""

from __future__ import annotations

from pathlib import Path

from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.reproduce.folder import ExpectedFailure, Reproduction
from clusterdeck.core.reproduce.runner import local_graph, without_folders


def reproduction(graph, **changes: object) -> Reproduction:
    fields = dict(job_id="job1", job_name="job", graph=graph, args=(), vertex_id="vertex-1",
                  subtask=0, attempt=0, attempt_id="job1/vertex-1#0/a0",
                  job_file="job/job.py", artifact_sha256="0" * 64,
                  expected=ExpectedFailure("ValueError", "no"), cores=2)
    fields.update(changes)
    return Reproduction(**fields)  # type: ignore[arg-type]


def test_a_spark_message_compares_by_the_scripts_name_not_its_folder() -> None:
    cluster = "ValueError: Spark stage 0.0 (collect at /srv/tm-1/jobs/ab/amounts.py:12) " \
              "failed: ValueError: bad"
    here = "ValueError: Spark stage 0.0 (collect at /home/me/repro/job/amounts.py:12) " \
           "failed: ValueError: bad"
    assert without_folders(cluster) == without_folders(here)
    assert "(collect at amounts.py:12)" in without_folders(here)


def test_the_sinks_write_into_the_folders_output_not_the_jobs(tmp_path) -> None:
    job_file = tmp_path / "job.py"
    job_file.write_text("def build(env):\n    env.from_collection([1]).write_text("
                        "'/srv/results')\n")
    graph = load_job(job_file).graph
    folder = tmp_path / "repro"
    local = local_graph(reproduction(graph), folder)
    sink = local.vertices[-1].operators[-1]
    assert sink.params["path"] == str(folder / "output" / sink.id)


def test_a_scripts_copied_arguments_point_into_the_folder(tmp_path) -> None:
    job_file = tmp_path / "job.py"
    job_file.write_text("import pyspark\n")
    graph = load_job(job_file, ("data.csv", "3"), cwd="/srv/submitted").graph
    folder = Path("/home/me/repro")
    local = local_graph(reproduction(graph, script_args=("input/args/0-data.csv", "3"),
                                     spark_conf={"spark.sql.shuffle.partitions": "4"}),
                        folder)
    params = local.vertices[0].operators[0].params
    assert params["args"] == [str(folder / "input/args/0-data.csv"), "3"]
    assert params["cwd"] == str(folder)
    assert params["script"] == str(folder / "job/job.py")
    assert params["conf"] == {"spark.sql.shuffle.partitions": "4"}
