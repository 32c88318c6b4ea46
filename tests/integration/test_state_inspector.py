"""``clusterdeck state`` on a real cluster whose TaskManagers keep keyed state in the
rocksdb state backend (incremental checkpoints: a chain of shared files per subtask): a
running sum over 10,000 users, read back from its checkpoints once the job finished, key
by key against the job's own output; paged; and the first retained checkpoint diffed
against the last. The heap backend's snapshots, written by its own state and snapshot
writer, go through every query in tests/unit/core/stateinspector/test_queries.py; what a
real job adds (the chain's layout, the command) is the same in both backends, read here."""

from __future__ import annotations

import gc
import json
import textwrap

import pytest

from clusterdeck.core.cli.main import build_parser
from clusterdeck.core.cli.statecommands import cmd_state
from clusterdeck.core.config import paths
from clusterdeck.core.node import exitcodes
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers.jobcalls import JobWorker
from clusterdeck.gui.models.statereading import PAGE, StatePlace, open_state
from clusterdeck.gui.session import attach_config
from clusterdeck.gui.views.stateview import StateWindow
from tests.integration.clusters import SPARK_UP_AND_RESTARTS, wait_result
from tests.integration.test_failover import described
from tests.integration.test_streaming import committed
from tests.integration.test_streaming_rocksdb import BUDGET

pytestmark = [pytest.mark.integration, pytest.mark.cluster(
    {**SPARK_UP_AND_RESTARTS, "state.backend": "rocksdb", "state.backend.memory": BUDGET})]

USERS = 10_000
ROUNDS = 3
SUMS_JOB = '''
"""Per user, the running sum of its records' indices, each new sum a line."""

def build(env):
    out, count, rate, users = env.args[0], int(env.args[1]), float(env.args[2]), \\
        int(env.args[3])
    env.set_job_name("running sums").set_parallelism(2)
    env.enable_checkpointing(0.5, retained=100)
    (env.rate_source(rate, count)
        .map(lambda record: (f"user-{record[0] % users}", record[0]))
        .key_by(0)
        .sum(1, name="sum per user")
        .map(lambda pair: f"{pair[0]},{pair[1]}")
        .write_text(out))
'''


def inspect(config, capsys, *arguments: str) -> dict:
    args = build_parser().parse_args(["state", *arguments, "--json"])
    capsys.readouterr()
    code = cmd_state(config, args)
    captured = capsys.readouterr()
    assert code == exitcodes.OK, captured.err
    return json.loads(captured.out)


@pytest.mark.timeout(400)
def test_the_inspector_lists_pages_and_diffs_10000_keys_as_the_job_wrote_them(
        client, cluster, tmp_path, capsys, qtbot) -> None:
    local_cluster, _ = cluster
    config = local_cluster.config
    job = tmp_path / "sums.py"
    job.write_text(textwrap.dedent(SUMS_JOB))
    out = tmp_path / "out"
    job_id = client.submit(job, (str(out), str(USERS * ROUNDS), "2500", str(USERS)))
    result = wait_result(client, job_id, 300)
    assert result.status == JobStatus.FINISHED, described(result)
    vertex = next(v.id for v in client.snapshot(job_id).graph.vertices
                  if "sum per user" in v.name)

    sums: dict[str, int] = {}  # the job's output: each user's sums, the last the largest
    for line in committed(out):
        user, total = line.split(",")
        sums[user] = max(sums.get(user, 0), int(total))
    assert sums == {f"user-{u}": ROUNDS * u + USERS * sum(range(ROUNDS)) for u in range(USERS)}

    listed = inspect(config, capsys, job_id, "keys", vertex, "--limit", str(2 * USERS))
    assert listed["matched"] == USERS
    assert {row["key"]: row["value"] for row in listed["keys"]} == sums

    pages = [inspect(config, capsys, job_id, "keys", vertex, "--offset", str(offset),
                     "--limit", "3000")["keys"] for offset in range(0, USERS, 3000)]
    assert [row for page in pages for row in page] == listed["keys"]
    found = inspect(config, capsys, job_id, "keys", vertex, "--prefix", "user-999")
    assert sorted(row["key"] for row in found["keys"]) == \
        sorted(f"user-{u}" for u in range(USERS) if str(u).startswith("999"))

    vertices = inspect(config, capsys, job_id)["subtasks"]
    assert [row["subtask"] for row in vertices] == [f"{vertex}#0", f"{vertex}#1"]
    assert sum(row["keys"] for row in vertices) == USERS

    growth = inspect(config, capsys, job_id, "growth")["checkpoints"]
    # Two at least, one before all users had a record: on a loaded machine few of the
    # 0.5 s checkpoints complete within the job's 12 s (2 of them in one CI run).
    assert len(growth) >= 2, growth
    keys_by_checkpoint = [row["vertices"].get(vertex, {"keys": 0})["keys"] for row in growth]
    assert keys_by_checkpoint == sorted(keys_by_checkpoint) and keys_by_checkpoint[-1] == USERS
    first = next(row["checkpoint"] for row in growth if 0 < row["vertices"].get(
        vertex, {"keys": 0})["keys"] < USERS)
    last = growth[-1]["checkpoint"]
    if config["state.backend"] == "rocksdb":  # the last checkpoint read a chain of files
        metadata = next(paths.cluster_dir(config["cluster.id"]).rglob(
            f"{job_id}/chk-{last}/_metadata"))
        chains = [state["shared"] for subtask, state in json.loads(
            metadata.read_text())["states"].items() if subtask.startswith(f"{vertex}#")]
        assert chains and all(len(chain) > 1 for chain in chains), chains

    earlier = inspect(config, capsys, job_id, "keys", vertex, "--checkpoint", str(first),
                      "--limit", str(2 * USERS))
    before = {row["key"]: row["value"] for row in earlier["keys"]}
    for user, value in before.items():  # a sum of the user's first records, no other
        u = int(user.removeprefix("user-"))
        assert value in {sum(u + USERS * r for r in range(n)) for n in range(1, ROUNDS + 1)}
    changes = inspect(config, capsys, job_id, "diff", str(first), str(last), "--vertex",
                      vertex, "--limit", str(2 * USERS))
    assert changes["counts"] == {
        "added": USERS - len(before), "removed": 0,
        "changed": sum(1 for user, value in before.items() if sums[user] != value)}
    assert {row["key"]: (row["before"], row["after"]) for row in changes["changes"]} == \
        {user: (before.get(user), total) for user, total in sums.items()
         if before.get(user) != total}
    state_view_shows(qtbot, config, job_id, vertex, sums, (first, last, changes["counts"]))


def state_view_shows(qtbot, config, job_id: str, vertex: str, sums: dict[str, int],
                     diffed: tuple[int, int, dict[str, int]]) -> None:
    """The window's State view on the same job, read off the GUI thread by the command
    in a child process: a page of the job's own sums, a search, the diff's counts."""
    worker = JobWorker(ClusterBridge())
    place = StatePlace(job_id, config)
    window = StateWindow("running sums", {vertex: "sum per user"}, worker.run,
                         lambda: open_state(place, attach_config))
    qtbot.addWidget(window)
    try:
        qtbot.waitUntil(lambda: window.keys.shown is not None, timeout=120_000)
        assert not window.message.text(), window.message.text()
        assert window.keys.vertex.currentText() == f"sum per user ({vertex})"
        page = window.keys.shown
        assert page.matched == USERS and len(page.rows) == PAGE
        assert {row.key: int(row.value) for row in page.rows} == \
            {row.key: sums[row.key] for row in page.rows}
        window.keys.prefix.setChecked(True)
        window.keys.search.setText("user-999")
        qtbot.waitUntil(lambda: window.keys.shown.query.prefix == "user-999", timeout=120_000)
        assert sorted(row.key for row in window.keys.shown.rows) == \
            sorted(f"user-{u}" for u in range(USERS) if str(u).startswith("999"))
        first, last, counts = diffed
        diff = window.diff
        for combo, value in ((diff.before, str(first)), (diff.after, str(last)),
                             (diff.vertex, vertex)):
            combo.setCurrentIndex(combo.findData(value))
        diff.compare.click()
        qtbot.waitUntil(lambda: diff.shown is not None, timeout=120_000)
        assert diff.shown.label == f"checkpoint {first} \u2192 checkpoint {last}"
        assert diff.shown.counts == counts
    finally:
        worker.shutdown()
        window.close()
        gc.collect()  # here, not on a paho thread later (tests/gui/conftest.py)
