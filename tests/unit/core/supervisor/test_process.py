"""ProcessSpec validation and the frozen snapshots."""

import dataclasses
from pathlib import Path

import pytest

from clusterdeck.core.supervisor import ProcessInfo, ProcessSpec, ProcessStatus


def test_argv_is_kept_as_a_tuple_of_strings():
    spec = ProcessSpec("taskmanager-2", "taskmanager", ["python", Path("/x/run.py")])

    assert spec.argv == ("python", "/x/run.py")


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "-starts-with-dash", "with space"])
def test_a_name_that_cannot_name_a_log_file_is_refused(name):
    with pytest.raises(ValueError, match="process name"):
        ProcessSpec(name, "role", ("true",))


def test_an_empty_argv_is_refused():
    with pytest.raises(ValueError, match="empty argv"):
        ProcessSpec("broker", "broker", ())


def test_the_environment_cannot_be_changed_through_the_spec():
    env = {"A": "1"}
    spec = ProcessSpec("broker", "broker", ("true",), env=env)
    env["A"] = "2"

    assert spec.env == {"A": "1"}
    with pytest.raises(TypeError):
        spec.env["A"] = "3"  # type: ignore[index]


def test_specs_and_snapshots_are_frozen():
    spec = ProcessSpec("broker", "broker", ("true",))
    info = ProcessInfo("broker", "broker", None, ProcessStatus.STOPPED, None, 0, None,
                       Path("broker.log"))

    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.restart = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.status = ProcessStatus.RUNNING  # type: ignore[misc]


def test_specs_with_an_environment_are_hashable():
    spec = ProcessSpec("broker", "broker", ("true",), env={"A": "1"})

    assert {spec} == {ProcessSpec("broker", "broker", ("true",), env={"A": "1"})}
