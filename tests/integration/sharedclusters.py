"""One cluster for consecutive modules that ask for the same one.

Starting a cluster (its broker, JobManager, TaskManagers and their Spark) takes seconds of
the two cores a CI run has, and stopping it more; modules whose clusters are configured
alike get one between them. tests/integration/conftest.py orders the modules so that
those are neighbours, and hands a module's cluster on to the next module only when it
asks for the same one, no test of the module failed and the cluster is idle again (every
TaskManager registered with all of its slots free): a module finds the cluster as the
first module of its own would, less the jobs of the modules before it. At most one
cluster is kept at a time; every other one is stopped (every process) when its module
ends, and the kept one at the end of the session, whether the tests passed or not.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import pytest

from clusterdeck.core.protocol import messages as p
from tests.integration.clusters import RunningCluster
from tests.waiting import wait_for

ClusterKey = Hashable


def cluster_key(item: pytest.Item) -> ClusterKey | None:
    """What tells the cluster of ``item``'s module from the others: the ``cluster``
    marker's settings and broker kind for the conftest's ``cluster`` fixture, the name of
    the ``up_cluster`` fixture for the ``clusterdeck up`` cluster; None for a module that
    starts clusters of its own."""
    if "up_cluster" in item.fixturenames:
        return "up_cluster"
    if "cluster" not in item.fixturenames:
        return None
    marker = item.get_closest_marker("cluster")
    if marker is None:  # a module with a cluster fixture of its own
        return None
    return settings_key(marker)


def settings_key(marker: pytest.Mark) -> ClusterKey:
    """The broker kind and the settings of a ``cluster`` marker."""
    settings = dict(marker.args[0]) if marker.args else {}
    return ("cluster", marker.kwargs.get("kind", "auto"),
            tuple(sorted((name, repr(value)) for name, value in settings.items())))


def module_key(items: Iterable[pytest.Item]) -> ClusterKey | None:
    """The key of the first of a module's tests that has one."""
    return next((key for item in items if (key := cluster_key(item)) is not None), None)


def neighbours_sharing(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with every module whose cluster is configured as an earlier module's
    moved up right behind it; the order is otherwise kept, within a module too."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    keys = {name: module_key(module) for name, module in modules.items()}
    ordered: list[pytest.Item] = []
    placed: set[str] = set()
    for name in modules:
        if name in placed:
            continue
        alike = [name] if keys[name] is None else [
            other for other in modules if other not in placed and keys[other] == keys[name]]
        for other in alike:
            placed.add(other)
            ordered.extend(modules[other])
    return ordered


def next_module_keys(items: list[pytest.Item]) -> dict[str, ClusterKey | None]:
    """For each module of the run, the key of the module that runs after it."""
    names: list[str] = []
    by_name: dict[str, list[pytest.Item]] = {}
    for item in items:
        name = item.nodeid.split("::", 1)[0]
        if name not in by_name:
            names.append(name)
            by_name[name] = []
        by_name[name].append(item)
    return {name: (module_key(by_name[after]) if after else None)
            for name, after in zip(names, [*names[1:], None], strict=True)}


def is_idle(running: RunningCluster, timeout: float = 60.0) -> bool:
    """Every TaskManager the cluster started registered with all of its slots free
    (restarted, if a test killed it) within ``timeout``."""
    local, watcher = running
    count = int(local.config["taskmanager.count"])
    wanted = {f"taskmanager-{n}" for n in range(1, count + 1)}

    def idle() -> bool:
        overview = watcher.latest
        if overview is None:
            return False
        free = {t.id for t in overview.taskmanagers
                if t.state is p.TaskManagerState.REGISTERED and t.slots_free == t.slots_total}
        return wanted <= free
    try:
        wait_for(idle, timeout, "the cluster idle")
    except AssertionError:
        return False
    return True


class ClusterPool:
    """The one cluster kept for the next module, with what stops it. Used on the test
    thread only."""

    def __init__(self) -> None:
        self._kept: tuple[ClusterKey, ExitStack, Any] | None = None

    def acquire(self, key: ClusterKey, start: Callable[[], AbstractContextManager[Any]]
                ) -> tuple[Any, ExitStack]:
        """The kept cluster if it is ``key``'s, else a new one from ``start`` (the kept
        one stopped first); with the stack that stops it."""
        if self._kept is not None:
            kept_key, stack, running = self._kept
            self._kept = None
            if kept_key == key:
                return running, stack
            stack.close()
        stack = ExitStack()
        try:
            running = stack.enter_context(start())
        except BaseException:
            stack.close()
            raise
        return running, stack

    def release(self, key: ClusterKey, running: Any, stack: ExitStack, keep: bool) -> None:
        """Keep the cluster for the next module, or stop it now."""
        if keep:
            self._kept = (key, stack, running)
        else:
            stack.close()

    def close(self) -> None:
        if self._kept is not None:
            _key, stack, _running = self._kept
            self._kept = None
            stack.close()
