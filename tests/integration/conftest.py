"""The cluster and the client most integration modules share: one of each per module.

A module states how its cluster differs from the default with a marker, as in
``pytestmark = [pytest.mark.integration, pytest.mark.cluster(SPARK_UP_AND_RESTARTS)]``;
``pytest.mark.cluster(settings, kind="amqtt")`` also picks the broker. A module whose
cluster is built differently (prefilled folders, namespaced TaskManagers, one cluster per
broker kind) defines its own ``cluster`` fixture, and the ``client`` here connects to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clusterdeck.core.client.jobclient import JobClient
from tests.integration.clusters import RunningCluster, running_cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cluster(settings, kind='auto'): the settings of the module's cluster")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[RunningCluster]:
    """The module's cluster, started on first use and stopped (every process) after the
    module's last test, whether it passed or not."""
    marker = request.node.get_closest_marker("cluster")
    settings = dict(marker.args[0]) if marker and marker.args else {}
    kind = marker.kwargs.get("kind", "auto") if marker else "auto"
    with running_cluster(kind, **settings) as running:
        yield running


@pytest.fixture(scope="module")
def client(cluster: tuple) -> Iterator[JobClient]:
    """A job client of the module's cluster (its first element is the LocalCluster)."""
    with JobClient(cluster[0].config, connect_timeout=30) as job_client:
        yield job_client
