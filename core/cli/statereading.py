"""What ``clusterdeck state`` reads and prints (the command's options: ``statecommands``).

Imported only when the command runs: the state's codec imports pyspark."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from clusterdeck.core.checkpointing import CheckpointStorage, CheckpointStorageError
from clusterdeck.core.config.settings import Config
from clusterdeck.core.engine.records import to_jsonable
from clusterdeck.core.node import exitcodes
from clusterdeck.core.stateinspector import (
    Entry,
    InspectorError,
    Snapshot,
    diff,
    growth,
    keys,
    open_checkpoint,
    open_savepoint,
    retained_checkpoints,
    sizes,
    top,
)
from clusterdeck.core.stateinspector.location import job_storage, savepoint_folder


def read_state(config: Config, args: argparse.Namespace) -> int:
    try:
        storage, job_id = job_storage(config, args.job)
        answer = _answer(storage, job_id, config, args)
    except (InspectorError, CheckpointStorageError) as error:
        print(f"clusterdeck: {error}", file=sys.stderr)
        return exitcodes.FAILED
    except _Usage as error:
        print(f"clusterdeck state: {error}", file=sys.stderr)
        return exitcodes.USAGE
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print("\n".join(_lines(args.action, answer)))
    return exitcodes.OK


class _Usage(Exception):
    pass


def _snapshot(storage: CheckpointStorage, job_id: str, config: Config, which: str
              ) -> Snapshot:
    """A checkpoint id, or a savepoint folder (a path, or a name in the cluster's
    savepoint folder)."""
    if which.isdigit():
        return open_checkpoint(storage, job_id, int(which))
    return open_savepoint(savepoint_folder(config, which))


def _answer(storage: CheckpointStorage, job_id: str, config: Config,
            args: argparse.Namespace) -> dict[str, Any]:
    action, operands = args.action, args.operands
    wanted = {"keys": 1, "top": 1, "diff": 2}.get(action, 0)
    if len(operands) != wanted:
        raise _Usage(f"{action} takes {wanted or 'no'} argument(s), got {len(operands)}")
    if args.offset < 0 or args.limit < 1:
        raise _Usage("--offset must be 0 or more and --limit 1 or more")
    if action == "checkpoints":
        return {"job": job_id, "checkpoints": [
            checkpoint.checkpoint_id for checkpoint in retained_checkpoints(storage, job_id)]}
    if action == "growth":
        return {"job": job_id, "checkpoints": [
            {"checkpoint": checkpoint_id, "vertices": {
                vertex: {"keys": size.keys, "bytes": size.bytes}
                for vertex, size in by_vertex.items()}}
            for checkpoint_id, by_vertex in growth(storage, job_id)]}
    if action == "diff":
        before, after = (_snapshot(storage, job_id, config, which) for which in operands)
        page = diff(before, after, args.vertex, args.offset, args.limit)
        return {"before": before.label, "after": after.label, "counts": page.counts,
                "offset": args.offset, "changes": [
                    {"change": change.kind, "subtask": change.entry.subtask,
                     "key": to_jsonable(change.entry.key),
                     "before": to_jsonable(change.before.value) if change.before else None,
                     "after": to_jsonable(change.after.value) if change.after else None}
                    for change in page.changes]}
    snapshot = _snapshot(storage, job_id, config, args.savepoint) if args.savepoint \
        else open_checkpoint(storage, job_id, args.checkpoint)
    source = {"job": job_id, "snapshot": snapshot.label}
    if action == "vertices":
        return {**source, "subtasks": [
            {"vertex": size.vertex, "subtask": size.subtask, "keys": size.keys,
             "bytes": size.bytes} for size in sizes(snapshot)]}
    if action == "keys":
        found = keys(snapshot, operands[0], args.offset, args.limit, args.search, args.prefix)
        return {**source, "vertex": operands[0], "matched": found.matched,
                "offset": args.offset, "keys": [_entry(entry) for entry in found.entries]}
    return {**source, "vertex": operands[0],
            "keys": [_entry(entry) for entry in top(snapshot, operands[0], args.limit)]}


def _entry(entry: Entry) -> dict[str, Any]:
    return {"subtask": entry.subtask, "key": to_jsonable(entry.key),
            "value": to_jsonable(entry.value), "bytes": entry.size}


def _lines(action: str, answer: dict[str, Any]) -> list[str]:
    """The answer as text for a terminal."""
    if action == "checkpoints":
        return [f"job {answer['job']}: retained checkpoints "
                + ", ".join(str(checkpoint) for checkpoint in answer["checkpoints"])]
    if action == "growth":
        lines = [f"job {answer['job']}: keyed state per retained checkpoint"]
        for row in answer["checkpoints"]:
            parts = [f"{vertex} {size['keys']:,} keys {size['bytes']:,} B"
                     for vertex, size in row["vertices"].items()]
            lines.append(f"  checkpoint {row['checkpoint']:>5}: {'; '.join(parts) or '-'}")
        return lines
    if action == "diff":
        counts = answer["counts"]
        lines = [f"{answer['before']} -> {answer['after']}: {counts['added']:,} added, "
                 f"{counts['removed']:,} removed, {counts['changed']:,} changed"]
        marks = {"added": "+", "removed": "-", "changed": "~"}
        for change in answer["changes"]:
            values = {"added": _short(change["after"]), "removed": _short(change["before"]),
                      "changed": f"{_short(change['before'])} -> {_short(change['after'])}"}
            lines.append(f"  {marks[change['change']]} {change['subtask']}  "
                         f"{_short(change['key'])}: {values[change['change']]}")
        return lines
    head = f"job {answer['job']}, {answer['snapshot']}"
    if action == "vertices":
        lines = [f"{head}: keyed state per subtask",
                 f"  {'subtask':<32} {'keys':>10} {'bytes':>12}"]
        lines += [f"  {row['subtask']:<32} {row['keys']:>10,} {row['bytes']:>12,}"
                  for row in answer["subtasks"]]
        return lines
    if action == "keys":
        shown = len(answer["keys"])
        lines = [f"{head}, vertex {answer['vertex']}: keys {answer['offset'] + 1 if shown else 0}"
                 f"-{answer['offset'] + shown} of {answer['matched']:,}"]
    else:
        lines = [f"{head}, vertex {answer['vertex']}: the {len(answer['keys'])} biggest keys"]
    lines += [f"  {row['subtask']:<12} {row['bytes']:>8,} B  {_short(row['key'])}: "
              f"{_short(row['value'])}" for row in answer["keys"]]
    return lines


def _short(value: Any, width: int = 60) -> str:
    """A key or value for a terminal line: its repr, cut (``--json`` gives it whole)."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 1]}\u2026"
