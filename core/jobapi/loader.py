"""Loading a job file: a dataflow job (``build(env)``) or an ordinary PySpark script.

The client loads a job once to refuse broken files at submit time; every TaskManager
loads it again from the job's artifact to get the user's functions back (they never
travel over the wire). Which kind a file is, is read from its syntax tree, never by
running it: a top-level ``build`` makes a dataflow job, otherwise an ``import pyspark``
makes a PySpark script, whose code only ever runs in its task.

A dataflow file is executed as a fresh module with a unique name, its folder on
``sys.path`` so it can import sibling files. Afterwards the folder leaves ``sys.path``
and the module and its siblings leave ``sys.modules``: two jobs with a ``helpers.py``
each never see each other's, and Spark's cloudpickle ships the user's functions to its
Python workers by value (a module not in ``sys.modules`` cannot be pickled by name).
Loads are serialised by a lock because ``sys.path`` and ``sys.modules`` are global;
callable from any thread.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
import threading
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from clusterdeck.core.jobapi import plan
from clusterdeck.core.jobapi.builder import build_graph
from clusterdeck.core.jobapi.environment import ExecutionEnvironment
from clusterdeck.core.jobapi.errors import JobLoadError
from clusterdeck.core.jobapi.plan import UserCode
from clusterdeck.core.jobapi.tracebacks import user_traceback
from clusterdeck.core.protocol.jobgraph import JobGraph, JobKind, JobVertex, OperatorSpec

_LOAD_LOCK = threading.Lock()


@dataclass(frozen=True)
class LoadedJob:
    """A job file, loaded: its graph and, for a dataflow job, each operator's user code."""

    path: Path
    args: tuple[str, ...]
    graph: JobGraph
    code: Mapping[str, UserCode] = field(default_factory=dict)
    counter_names: tuple[str, ...] = ()

    @property
    def kind(self) -> JobKind:
        return self.graph.kind


def detect_kind(source: str, filename: str = "<job>") -> JobKind | None:
    """DATAFLOW when the module defines ``build`` at top level, PYSPARK_SCRIPT when it
    imports pyspark, else None. Raises SyntaxError."""
    tree = ast.parse(source, filename=filename)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "build":
            return JobKind.DATAFLOW
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "build" for target in node.targets):
            return JobKind.DATAFLOW
        if isinstance(node, ast.ImportFrom) and any(
                (alias.asname or alias.name) == "build" for alias in node.names):
            return JobKind.DATAFLOW
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                alias.name.split(".")[0] == "pyspark" for alias in node.names):
            return JobKind.PYSPARK_SCRIPT
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pyspark":
            return JobKind.PYSPARK_SCRIPT
    return None


def load_job(path: str | os.PathLike[str], args: Sequence[str] = (), *,
             parallelism: int | None = None, expected: JobGraph | None = None,
             cwd: str = "", spark_conf: Mapping[str, str] | None = None) -> LoadedJob:
    """Load a job file; raises JobLoadError (with the user's traceback) when it is broken.

    ``parallelism``: the job's default parallelism (``submit -p``); ``set_parallelism``
    in ``build`` still wins. ``expected``: the graph the job was submitted with. A
    TaskManager passes it so the rebuilt operators are checked against it (built with
    its default parallelism) and its parameters (paths made absolute on the submitting
    machine) are the ones used. ``cwd`` and ``spark_conf``: for a PySpark script, the
    submitter's working directory and the script's Spark settings (``submit --conf``),
    which only a script can have.
    """
    submitted_as = os.path.abspath(path)  # a script's sys.argv[0], as spark-submit has it
    path = Path(path).resolve()
    args = tuple(str(arg) for arg in args)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobLoadError(f"cannot read job file {path}: {exc}") from exc
    try:
        kind = detect_kind(source, str(path))
    except SyntaxError as exc:
        raise JobLoadError(f"{path.name} has a syntax error: {exc.msg} (line {exc.lineno})",
                           user_traceback(exc, path.parent)) from None
    if kind is None:
        raise JobLoadError(f"{path.name} is not a job: it defines no build(env) function and "
                           "does not import pyspark")
    if kind is JobKind.PYSPARK_SCRIPT:
        job = LoadedJob(path, args, script_graph(path, args, submitted_as, cwd, spark_conf))
    elif spark_conf:
        raise JobLoadError(f"{path.name} is a dataflow job: Spark settings (submit --conf) "
                           "apply to PySpark scripts only")
    else:
        default = parallelism or (expected.default_parallelism if expected else 1)
        job = _load_dataflow(path, source, args, default)
    if expected is not None:
        job = _bind_to(job, expected)
    return job


def script_graph(path: Path, args: Sequence[str], submitted_as: str = "", cwd: str = "",
                 spark_conf: Mapping[str, str] | None = None) -> JobGraph:
    """A PySpark script's graph: one vertex, one operator, one slot. Its parameters say
    where it was submitted from (``script``, ``cwd``: engine/script.py runs it there when
    the TaskManager sees that folder) and its Spark settings (``conf``)."""
    operator = OperatorSpec(plan.operator_id(1), plan.PYSPARK_SCRIPT, path.name,
                            {"file": path.name, "args": list(args),
                             "script": submitted_as or str(path), "cwd": cwd,
                             "conf": dict(spark_conf or {})})
    vertex = JobVertex(plan.vertex_id(1), path.name, 1, (operator,))
    return JobGraph(name=path.stem, kind=JobKind.PYSPARK_SCRIPT, vertices=(vertex,))


def _load_dataflow(path: Path, source: str, args: tuple[str, ...],
                   parallelism: int) -> LoadedJob:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    module = types.ModuleType(f"clusterdeck_job_{_identifier(path.stem)}_{digest}")
    module.__file__ = str(path)
    with _LOAD_LOCK, _importable_from(path.parent, module):
        try:
            exec(compile(source, str(path), "exec"), module.__dict__)
        except (Exception, SystemExit) as exc:
            raise JobLoadError(f"{path.name} failed to load: {_one_line(exc)}",
                               user_traceback(exc, path.parent)) from None
        build = getattr(module, "build", None)
        if not callable(build):
            raise JobLoadError(f"{path.name}: build is not a function")
        env = ExecutionEnvironment(job_name=path.stem, args=args)
        try:
            env.set_parallelism(parallelism)
            build(env)
        except (Exception, SystemExit) as exc:
            raise JobLoadError(f"build(env) in {path.name} raised {_one_line(exc)}",
                               user_traceback(exc, path.parent)) from None
        try:
            graph, code = build_graph(env)
        except Exception as exc:
            raise JobLoadError(f"{path.name} declares a pipeline that cannot run: {exc}",
                               "") from None
    return LoadedJob(path, args, graph, code, env.counter_names)


@contextmanager
def _importable_from(folder: Path, module: types.ModuleType) -> Iterator[None]:
    """The job's folder on sys.path and the module in sys.modules while it loads; then
    both gone, with every module imported from the folder."""
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    sys.modules[module.__name__] = module
    try:
        yield
    finally:
        if sys.path and sys.path[0] == str(folder):
            del sys.path[0]
        else:
            sys.path.remove(str(folder))
        sys.modules.pop(module.__name__, None)
        forget_modules_from(folder, before)


def forget_modules_from(folder: Path, keep: set[str]) -> None:
    """Remove from sys.modules the modules (not in ``keep``) whose file is in ``folder``."""
    root = os.path.realpath(folder) + os.sep
    for name in set(sys.modules) - keep:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and os.path.realpath(file).startswith(root):
            del sys.modules[name]


def _bind_to(job: LoadedJob, expected: JobGraph) -> LoadedJob:
    def shape(graph: JobGraph) -> list[tuple[str, list[tuple[str, str]]]]:
        return [(v.id, [(op.id, op.kind) for op in v.operators]) for v in graph.vertices]

    if shape(job.graph) != shape(expected) or job.graph.kind != expected.kind:
        raise JobLoadError(f"{job.path.name} no longer builds the graph it was submitted "
                           "with (was the file changed?)")
    return LoadedJob(job.path, job.args, expected, job.code, job.counter_names)


def _identifier(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
