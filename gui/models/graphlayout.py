"""Where each job vertex goes: layers left to right, an order within each layer.

Pure code on the ``JobGraphSnapshot`` (no Qt), so it is cheap to test. A vertex's layer is the
longest path from a source to it, so every edge points to the right; within a layer,
vertices are ordered by the mean position of their producers (one barycentre sweep),
which keeps most edges from crossing in the small DAGs jobs have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clusterdeck.core.protocol.snapshots import JobGraphSnapshot


def layers(vertex_ids: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Vertices grouped by layer, each layer ordered; ``vertex_ids`` in topological order
    (as a snapshot lists them), edges as ``(source, target)``."""
    inputs: dict[str, list[str]] = {vertex: [] for vertex in vertex_ids}
    for source, target in edges:
        if source in inputs and target in inputs:
            inputs[target].append(source)
    depth: dict[str, int] = {}
    for vertex in vertex_ids:
        depth[vertex] = 1 + max((depth.get(s, 0) for s in inputs[vertex]), default=-1)
    grouped: list[list[str]] = [[] for _ in range(1 + max(depth.values(), default=-1))]
    for vertex in vertex_ids:
        grouped[depth[vertex]].append(vertex)
    position: dict[str, float] = {}
    for index, layer in enumerate(grouped):
        keys = {vertex: _barycentre(inputs[vertex], position, default=float(rank))
                for rank, vertex in enumerate(layer)}
        grouped[index] = sorted(layer, key=keys.__getitem__)
        position.update((vertex, float(rank)) for rank, vertex in enumerate(grouped[index]))
    return grouped


def _barycentre(sources: list[str], position: Mapping[str, float], default: float) -> float:
    placed = [position[source] for source in sources if source in position]
    return sum(placed) / len(placed) if placed else default


def snapshot_layers(snapshot: JobGraphSnapshot) -> list[list[str]]:
    vertex_ids = [vertex.id for vertex in snapshot.vertices]
    edges = [(edge.source, edge.target) for edge in snapshot.edges]
    return layers(vertex_ids, edges)


def structure_key(snapshot: JobGraphSnapshot) -> tuple[Any, ...]:
    """What decides the drawing's shape: when it is unchanged, only colours change."""
    return (snapshot.job_id,
            tuple((v.id, v.name, v.parallelism) for v in snapshot.vertices),
            snapshot.edges)
