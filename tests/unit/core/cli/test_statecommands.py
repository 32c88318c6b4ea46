"""``clusterdeck state`` against a cluster folder of this machine (no cluster running):
the checkpoints of the inspector's unit tests, put where the JobManager keeps them."""

import json
from types import SimpleNamespace

import pytest

from clusterdeck.core.checkpointing import Savepoints
from clusterdeck.core.cli.main import main
from clusterdeck.core.config import paths
from clusterdeck.core.node import exitcodes
from tests.unit.core.stateinspector.test_queries import JOB, Job


@pytest.fixture
def cluster_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    storage_dir = paths.cluster_dir("demo")
    job = Job(storage_dir / "work" / JOB / "checkpoints", "rocksdb")
    job.checkpoint(1, {"user-1": (1, "a"), "user-2": (2, "b")})
    job.checkpoint(2, {"user-2": (2, "c"), "user-3": (3, "d")})
    yield storage_dir, job
    job.close()


def state(capsys, *arguments):
    code = main(["--cluster", "demo", "state", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_keys_of_the_latest_checkpoint_as_json(cluster_folder, capsys):
    code, out, _ = state(capsys, "job", "keys", "counts", "--json")  # the id's beginning
    assert code == exitcodes.OK
    answer = json.loads(out)
    assert answer["snapshot"] == "checkpoint 2"
    assert {row["key"]: row["value"] for row in answer["keys"]} == {
        "user-1": [1, "a"], "user-2": [2, "c"], "user-3": [3, "d"]}


def test_a_savepoint_named_in_the_clusters_savepoint_folder_diffs_against_a_checkpoint(
        cluster_folder, capsys):
    storage_dir, job = cluster_folder
    checkpoint = job.storage.completed(JOB)[0][0]
    graph = SimpleNamespace(name="sums", vertices=[SimpleNamespace(id="counts", parallelism=2),
                                                   SimpleNamespace(id="source", parallelism=1)],
                            max_parallelism=128)
    folder = Savepoints(storage_dir / "savepoints").write(checkpoint, job.storage, graph)
    code, out, _ = state(capsys, JOB, "diff", folder.name, "2")
    assert code == exitcodes.OK
    assert out.splitlines()[0] == f"savepoint {folder.name} -> checkpoint 2: 1 added, " \
                                  "0 removed, 1 changed"


@pytest.mark.parametrize(("arguments", "error"), [
    (("nope",), "no job 'nope' has checkpoints on this machine"),
    ((JOB, "keys", "sums"), "checkpoint 2 holds no state of vertex 'sums'"),
    ((JOB, "--checkpoint", "9"), "no completed checkpoint 9 (retained: 1, 2)"),
])
def test_errors_are_one_line_and_exit_1(cluster_folder, capsys, arguments, error):
    code, _, err = state(capsys, *arguments)
    assert code == exitcodes.FAILED
    assert error in err


def test_a_cluster_without_storage_here_says_where_to_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    code, _, err = state(capsys, JOB)
    assert code == exitcodes.FAILED
    assert "checkpoints are where its JobManager runs" in err


def test_checkpoints_lists_the_retained_ids_for_the_window(cluster_folder, capsys):
    code, out, _ = state(capsys, JOB, "checkpoints", "--json")
    assert code == exitcodes.OK
    assert json.loads(out) == {"job": JOB, "checkpoints": [1, 2]}
    assert state(capsys, JOB, "checkpoints")[1] == f"job {JOB}: retained checkpoints 1, 2\n"
