"""Every instruction the scheduler can emit has its one handler in the JobMaster: none
is skipped without a word (each type, by ``functools.singledispatchmethod``)."""

from __future__ import annotations

import ast
import inspect
import typing

from clusterdeck.core.executiongraph import instructions as ins
from clusterdeck.core.executiongraph import scheduler
from clusterdeck.core.jobmanager.jobmaster import JobMaster


def handled() -> set[type]:
    return set(JobMaster.__dict__["_carry_out"].dispatcher.registry) - {object}


def emitted_by_the_scheduler() -> set[type]:
    """The instruction types the scheduler's module names (it builds each it emits)."""
    tree = ast.parse(inspect.getsource(scheduler))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    kinds = set(typing.get_args(ins.Instruction))
    return {kind for kind in kinds if kind.__name__ in names}


def test_every_instruction_type_has_a_handler() -> None:
    assert set(typing.get_args(ins.Instruction)) - handled() == set()


def test_every_instruction_the_scheduler_emits_has_a_handler() -> None:
    emitted = emitted_by_the_scheduler()
    assert {ins.NewAttempt, ins.ScheduleOrUpdateConsumers, ins.DeployTask} <= emitted
    assert emitted - handled() == set()

