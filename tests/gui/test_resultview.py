"""The result view: accumulators, outputs, stdout, and collected rows of any shape."""

from __future__ import annotations

from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.gui.views.resultview import VALUE, ResultView, RowsTableModel


def cells(model: RowsTableModel) -> list[list[str]]:
    return [[model.data(model.index(r, c)) for c in range(model.columnCount())]
            for r in range(model.rowCount())]


def test_scalars_make_one_value_column(qtbot):
    model = RowsTableModel()
    model.set_rows([1, 2.5, "x"])
    assert model.columns() == [VALUE]
    assert cells(model) == [["1"], ["2.5"], ["x"]]


def test_lists_make_a_column_per_position(qtbot):
    model = RowsTableModel()
    model.set_rows([["spark", 3], ["flink", 2, "extra"]])
    assert model.columns() == [0, 1, 2]
    assert cells(model) == [["spark", "3", ""], ["flink", "2", "extra"]]


def test_dicts_make_a_column_per_key_and_nested_values_show_as_json(qtbot):
    model = RowsTableModel()
    model.set_rows([{"country": "NL", "orders": 3}, {"country": "DE", "tags": ["a"]}])
    assert model.columns() == ["country", "orders", "tags"]
    assert cells(model) == [["NL", "3", ""], ["DE", "", '["a"]']]


def test_mixed_rows_keep_every_value(qtbot):
    model = RowsTableModel()
    model.set_rows([{"k": 1}, [7], 9])
    assert model.columns() == ["k", 0, VALUE]
    assert cells(model) == [["1", "", ""], ["", "7", ""], ["", "", "9"]]


def test_a_result_shows_accumulators_outputs_stdout_and_asks_for_its_rows(qtbot):
    view = ResultView()
    qtbot.addWidget(view)
    result = p.JobResult("job-1", "pi", JobStatus.FINISHED, duration=3.2,
                         accumulators={"lines": 120}, outputs=("/tmp/out",),
                         collected_paths=("/tmp/rows.json",), stdout="Pi is roughly 3.14\n",
                         finished=1, total=1, records={"vertex-1": {"in": 5, "out": 5}})
    view.show_job("job-1")
    with qtbot.waitSignal(view.rows_wanted) as wanted:
        view.set_result("job-1", result)
    assert wanted.args == [result]
    assert "FINISHED" in view.header.text() and "3.2 s" in view.header.text()
    assert view.accumulators.item(0, 0).text() == "lines"
    assert view.accumulators.item(0, 1).text() == "120"
    assert view.outputs.item(0).text() == "/tmp/out"
    assert "Pi is roughly" in view.stdout.toPlainText()
    view.show_rows("job-1", [[1, 2]] * 3, 5)
    assert view.rows.rowCount() == 3
    assert view.tabs.tabText(0) == "Collected rows (3 of 5)"


def test_a_job_still_running_says_its_result_comes_later(qtbot):
    view = ResultView()
    qtbot.addWidget(view)
    view.show_job("job-2")
    assert "has not ended yet" in view.header.text()
