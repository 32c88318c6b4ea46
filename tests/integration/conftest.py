"""The cluster and the client most integration modules share: one of each per module, or
one cluster for neighbouring modules that ask for the same one (tests/integration/
sharedclusters.py).

A module states how its cluster differs from the default with a marker, as in
``pytestmark = [pytest.mark.integration, pytest.mark.cluster(SPARK_UP_AND_RESTARTS)]``;
``pytest.mark.cluster(settings, kind="amqtt")`` also picks the broker. A module whose
cluster is built differently (prefilled folders, namespaced TaskManagers, one cluster per
broker kind) defines its own ``cluster`` fixture, and the ``client`` here connects to it.
``up_cluster`` is ``clusterdeck up`` as a user runs it (benchmarks/conformance.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from clusterdeck.core.client.jobclient import JobClient
from tests.integration.clusters import RunningCluster, running_cluster
from tests.integration.sharedclusters import (
    ClusterKey,
    ClusterPool,
    is_idle,
    neighbours_sharing,
    next_module_keys,
    settings_key,
)

if TYPE_CHECKING:
    from benchmarks.conformance import Cluster

NEXT_MODULE_KEYS = pytest.StashKey[dict[str, ClusterKey | None]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster(settings, kind='auto'): the settings of the module's cluster")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules whose clusters are configured alike run one after the other."""
    items[:] = neighbours_sharing(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Which cluster each module's successor asks for, among the tests that will run."""
    session.config.stash[NEXT_MODULE_KEYS] = next_module_keys(session.items)


@pytest.fixture(scope="session")
def cluster_pool() -> Iterator[ClusterPool]:
    """The cluster kept for the next module; stopped at the end of the session."""
    pool = ClusterPool()
    try:
        yield pool
    finally:
        pool.close()


def keeps_its_cluster(request: pytest.FixtureRequest, key: ClusterKey,
                      failed_before: int) -> bool:
    """Whether the module's cluster goes on to the next module: it asks for the same
    one, and no test of this module failed."""
    module = request.node.nodeid.split("::", 1)[0]
    return (request.config.stash[NEXT_MODULE_KEYS].get(module) == key
            and request.session.testsfailed == failed_before)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest,
            cluster_pool: ClusterPool) -> Iterator[RunningCluster]:
    """The module's cluster, started on first use (or the previous module's, idle, when it
    asks for the same one) and stopped (every process) after the module's last test,
    whether it passed or not, unless the next module takes it on."""
    marker = request.node.get_closest_marker("cluster")
    settings = dict(marker.args[0]) if marker and marker.args else {}
    kind = marker.kwargs.get("kind", "auto") if marker else "auto"
    key = settings_key(marker) if marker else None
    failed_before = request.session.testsfailed
    running, stack = cluster_pool.acquire(key, lambda: running_cluster(kind, **settings))
    keep = False
    try:
        yield running
        keep = key is not None and keeps_its_cluster(request, key, failed_before) \
            and is_idle(running)
    finally:
        cluster_pool.release(key, running, stack, keep)


@pytest.fixture(scope="module")
def up_cluster(request: pytest.FixtureRequest, cluster_pool: ClusterPool) -> Iterator[Cluster]:
    """``clusterdeck up`` as a user runs it: in a home of its own, without
    ``PYTHONHASHSEED`` whatever the test run's environment holds; one TaskManager whose
    Spark is up. Shared by the modules that compare scripts with spark-submit, each of
    which leaves it running scripts (conformance.compare restarts it otherwise); stopped
    (every process) also on failure."""
    from benchmarks.conformance import Cluster

    def start() -> Cluster:
        cluster = Cluster()
        cluster.env.pop("PYTHONHASHSEED", None)
        return cluster

    failed_before = request.session.testsfailed
    running, stack = cluster_pool.acquire("up_cluster", start)
    keep = False
    try:
        yield running
        keep = keeps_its_cluster(request, "up_cluster", failed_before) \
            and running.up is not None and running.up.poll() is None
    finally:
        cluster_pool.release("up_cluster", running, stack, keep)


@pytest.fixture(scope="module")
def client(cluster: tuple) -> Iterator[JobClient]:
    """A job client of the module's cluster (its first element is the LocalCluster)."""
    with JobClient(cluster[0].config, connect_timeout=30) as job_client:
        yield job_client
