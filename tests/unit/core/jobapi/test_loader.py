"""Loading job files: dataflow or PySpark script, and a clear refusal for broken ones."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from clusterdeck.core.jobapi.errors import JobLoadError
from clusterdeck.core.jobapi.loader import detect_kind, load_job
from clusterdeck.core.protocol.jobgraph import JobKind

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"

PIPELINE = """
def build(env):
    env.from_range(10).map(double, name="double").collect()

def double(x):
    return 2 * x
"""


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def refusal(path: Path, *args: str) -> JobLoadError:
    with pytest.raises(JobLoadError) as caught:
        load_job(path, list(args))
    return caught.value


def test_a_file_with_build_is_a_dataflow_job_and_its_functions_come_back(tmp_path):
    job = load_job(write(tmp_path, "double.py", PIPELINE), ["a", "b"])
    assert job.kind is JobKind.DATAFLOW
    assert job.args == ("a", "b")
    assert job.graph.name == "double"
    assert job.code["op-2"].fn(21) == 42


def test_env_args_reach_build(tmp_path):
    path = write(tmp_path, "args.py", """
        def build(env):
            env.from_range(int(env.args[0])).collect(name=env.args[1])
    """)
    job = load_job(path, ["5", "numbers"])
    assert job.graph.vertices[0].operators[-1].name == "numbers"
    assert job.graph.vertices[0].operators[0].params == {"start": 0, "end": 5}


def test_a_pyspark_script_is_detected_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    path = write(tmp_path, "script.py", f"""
        from pathlib import Path
        from pyspark.sql import SparkSession
        Path({str(marker)!r}).write_text("ran")
        if __name__ == "__main__":
            spark = SparkSession.builder.getOrCreate()
    """)
    job = load_job(path, ["10"])
    assert job.kind is JobKind.PYSPARK_SCRIPT
    assert not marker.exists()
    [vertex] = job.graph.vertices
    assert vertex.parallelism == 1
    assert vertex.operators[0].kind == "pyspark.script"
    assert vertex.operators[0].params == {"file": "script.py", "args": ["10"],
                                          "script": str(path), "cwd": "", "conf": {}}


def test_a_script_carries_where_it_was_submitted_from_and_its_spark_settings(tmp_path,
                                                                           monkeypatch):
    write(tmp_path, "script.py", "import pyspark\n")
    monkeypatch.chdir(tmp_path)
    job = load_job("script.py", ["a"], cwd="/home/me/project",
                   spark_conf={"spark.sql.shuffle.partitions": "3"})
    params = job.graph.vertices[0].operators[0].params
    assert params["script"] == str(tmp_path / "script.py")  # absolute, as spark-submit's argv[0]
    assert params["cwd"] == "/home/me/project"
    assert params["conf"] == {"spark.sql.shuffle.partitions": "3"}


def test_spark_settings_for_a_dataflow_job_are_refused(tmp_path):
    path = write(tmp_path, "job.py", "def build(env):\n    env.from_range(0, 3).collect()\n")
    with pytest.raises(JobLoadError, match="apply to PySpark scripts only"):
        load_job(path, spark_conf={"spark.sql.shuffle.partitions": "3"})


def test_detection_reads_the_syntax_tree():
    assert detect_kind("def build(env): pass") is JobKind.DATAFLOW
    assert detect_kind("from helpers import build") is JobKind.DATAFLOW
    assert detect_kind("import pyspark.sql as s") is JobKind.PYSPARK_SCRIPT
    assert detect_kind("def main():\n    from pyspark import SparkContext") \
        is JobKind.PYSPARK_SCRIPT
    assert detect_kind("print('hello')") is None


def test_a_syntax_error_is_refused_with_its_line(tmp_path):
    error = refusal(write(tmp_path, "broken.py", "def build(env):\n    return (\n"))
    assert "broken.py has a syntax error" in error.message
    assert 'File "' in error.traceback_text and "broken.py" in error.traceback_text
    assert "SyntaxError" in error.traceback_text


def test_an_import_error_is_refused_with_the_users_traceback(tmp_path):
    error = refusal(write(tmp_path, "imports.py", """
        import no_such_module_for_clusterdeck

        def build(env):
            pass
    """))
    assert error.message == ("imports.py failed to load: ModuleNotFoundError: No module named "
                             "'no_such_module_for_clusterdeck'")
    assert "imports.py\", line 2" in error.traceback_text
    assert "loader.py" not in error.traceback_text


def test_a_file_that_is_no_job_is_refused(tmp_path):
    error = refusal(write(tmp_path, "plain.py", "print('hello')\n"))
    assert "defines no build(env) function and does not import pyspark" in error.message


def test_a_build_that_raises_is_refused_with_the_users_traceback(tmp_path):
    error = refusal(write(tmp_path, "raises.py", """
        def build(env):
            helper()

        def helper():
            raise RuntimeError("no input configured")
    """))
    assert error.message == "build(env) in raises.py raised RuntimeError: no input configured"
    assert error.traceback_text.startswith("Traceback (most recent call last):")
    assert "raises.py\", line 3, in build" in error.traceback_text
    assert "raises.py\", line 6, in helper" in error.traceback_text
    assert "loader.py" not in error.traceback_text


def test_an_unknown_operator_argument_is_refused_naming_the_operator(tmp_path):
    error = refusal(write(tmp_path, "typo.py", """
        def build(env):
            env.from_range(3).map(abs, paralelism=2).collect()
    """))
    assert "map() got an unknown argument 'paralelism' (did you mean 'parallelism'?)" \
        in error.message
    assert "typo.py\", line 3, in build" in error.traceback_text


def test_a_pipeline_that_cannot_run_is_refused(tmp_path):
    error = refusal(write(tmp_path, "nosink.py", """
        def build(env):
            env.from_range(3).map(abs)
    """))
    assert "no sink" in error.message


def test_sibling_modules_are_importable_and_forgotten_afterwards(tmp_path):
    write(tmp_path, "helpers_for_test.py", "def triple(x):\n    return 3 * x\n")
    path = write(tmp_path, "uses.py", """
        from helpers_for_test import triple

        def build(env):
            env.from_range(3).map(triple).collect()
    """)
    path_before = list(sys.path)
    job = load_job(path)
    assert job.code["op-2"].fn(2) == 6
    assert sys.path == path_before
    assert "helpers_for_test" not in sys.modules
    assert not any(name.startswith("clusterdeck_job_") for name in sys.modules)


def test_two_jobs_with_same_named_siblings_each_get_their_own(tmp_path):
    for folder, factor in (("one", 1), ("two", 2)):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder, "shared_helper.py", f"FACTOR = {factor}\n")
        write(tmp_path / folder, "job.py", """
            import shared_helper

            def build(env):
                env.from_range(shared_helper.FACTOR).collect()
        """)
    ends = [load_job(tmp_path / folder / "job.py").graph.vertices[0].operators[0].params["end"]
            for folder in ("one", "two")]
    assert ends == [1, 2]


def test_a_taskmanager_load_uses_the_submitted_graph(tmp_path):
    path = write(tmp_path, "double.py", PIPELINE)
    submitted = load_job(path).graph
    job = load_job(path, expected=submitted)
    assert job.graph is submitted

    write(tmp_path, "double.py", PIPELINE.replace(".map(", ".filter(bool).map("))
    error = refusal_with_expected(path, submitted)
    assert "no longer builds the graph it was submitted with" in error.message


def refusal_with_expected(path, graph):
    with pytest.raises(JobLoadError) as caught:
        load_job(path, expected=graph)
    return caught.value


@pytest.mark.parametrize("name, kind", [("wordcount.py", JobKind.DATAFLOW),
                                        ("join_csv.py", JobKind.DATAFLOW),
                                        ("sql_aggregate.py", JobKind.DATAFLOW),
                                        ("failing_job.py", JobKind.DATAFLOW),
                                        ("pi.py", JobKind.PYSPARK_SCRIPT)])
def test_the_examples_load(name, kind):
    assert load_job(EXAMPLES / name).kind is kind


def test_a_syntax_error_shows_only_the_file_line_and_caret(tmp_path):
    error = refusal(write(tmp_path, "caret.py", "def build(env):\n    return (\n"))
    assert error.traceback_text.lstrip().startswith(f'File "{tmp_path / "caret.py"}", line 2')
    assert "^" in error.traceback_text
    assert "loader.py" not in error.traceback_text


def test_a_refused_argument_points_at_the_users_line_not_into_the_api(tmp_path):
    error = refusal(write(tmp_path, "typo2.py", """
        def build(env):
            env.from_range(3).filter(bool, nme="x").collect()
    """))
    assert "api.py" not in error.traceback_text
    assert error.traceback_text.rstrip().endswith(
        "filter() got an unknown argument 'nme' (did you mean 'name'?); it takes: fn, name, "
        "parallelism")


def test_a_submit_parallelism_is_the_default_and_build_may_override_it(tmp_path):
    plain = write(tmp_path, "plain.py", PIPELINE)
    assert load_job(plain, parallelism=4).graph.vertices[0].parallelism == 4
    fixed = write(tmp_path, "fixed.py", PIPELINE.replace(
        "def build(env):\n", "def build(env):\n    env.set_parallelism(2)\n"))
    assert load_job(fixed, parallelism=4).graph.vertices[0].parallelism == 2


def test_a_rebuild_against_the_submitted_graph_uses_its_default_parallelism(tmp_path):
    path = write(tmp_path, "mixed.py", """
        def build(env):
            env.from_range(10, parallelism=2).map(abs).collect()
    """)
    submitted = load_job(path, parallelism=2).graph
    assert len(submitted.vertices) == 1   # chained only when the map runs 2 wide too
    assert load_job(path, expected=submitted).graph is submitted


SIBLINGS = {"core.py": "def tag(x):\n    return f'core:{x}'\n",
            "gui.py": "LABEL = 'gui-own'\n",
            "broker.py": "def double(x):\n    return 2 * x\n"}
USES_SIBLINGS = """
import broker
import core
import gui

def build(env):
    env.from_range(10).map(label, name="label").collect()

def label(x):
    return core.tag(broker.double(x)) + gui.LABEL
"""


def test_a_job_with_siblings_named_core_gui_and_broker_imports_its_own(tmp_path):
    for name, source in SIBLINGS.items():
        write(tmp_path, name, source)
    job = load_job(write(tmp_path, "siblings.py", USES_SIBLINGS))
    label = next(code.fn for code in job.code.values()
                 if getattr(code.fn, "__name__", "") == "label")
    assert label(4) == "core:8gui-own"
    assert Path(label.__globals__["core"].__file__).parent == tmp_path
