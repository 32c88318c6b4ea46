"""Conformance: the examples shipped in the pyspark wheel, under spark-submit and under
``clusterdeck submit``, compared by exit status and stdout.

Every example program of the installed wheel (``pyspark/examples/src/main/python``, its
``sql/``, ``ml/``, ``mllib/`` and ``streaming/`` folders) is either run or excluded with
a reason (``EXCLUDED``). A run is two runs of the same command line from the same
working directory, the pyspark folder, so the examples' relative data paths
(``data/mllib/...``) resolve:

- ``spark-submit --master local[2] examples/src/main/python/X.py ARGS``;
- ``clusterdeck submit examples/src/main/python/X.py --restart-strategy none -- ARGS`` on
  one running local cluster (``clusterdeck up --taskmanagers 1 --slots 2``, so its Spark
  is ``local[2]`` too), started once in a fresh ``CLUSTERDECK_HOME`` and warmed up with a
  tiny script first.

Only stdout is compared: spark-submit writes Spark's log to stderr (and the script's
stderr, which it would merge into its stdout, is kept apart: see ``spark_submit``), and
``clusterdeck submit`` writes nothing of its own to stdout (its progress line, the job's
status and the script's stderr go to stderr), so both stdouts are the script's alone. How they are
compared is each program's ``Rule`` (``RULES``, else the default of its folder). Files an
example writes into the pyspark folder (saved models, ``spark-warehouse``) are removed after
each run, so the second run starts from the same folder as the first.

    python -m benchmarks.conformance [--only GLOB ...] [--results FILE] [--timeout S]
    python -m benchmarks.conformance --table-from FILE

``--only`` takes globs of program names relative to the examples folder (``pi.py``,
``sql/*``, ``ml/[a-f]*``), run in the order given; ``--results`` appends both runs of each
program (exit status, time, stdout, stderr) to FILE as a JSON line as soon as they are
done, and ``--table-from`` judges such a file (several runs may append to one file) by the
rules as they are now and prints the Markdown table of docs/conformance.md.

Runs on the main thread only, one program at a time: the two runs of a program never
overlap, so each has the machine's cores to itself (as far as the rest of the machine allows).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyspark

from benchmarks._harness import (
    _die_with_parent_hook,
    exit_on_sigterm,
    machine_summary,
    markdown_table,
)

PYSPARK_HOME = Path(pyspark.__file__).resolve().parent
EXAMPLES = "examples/src/main/python"  # relative to PYSPARK_HOME: the path both commands get
BIN = Path(sys.executable).parent
# The virtualenv's spark-submit, else the wheel's own (a virtualenv that sees an installed
# pyspark without having installed it has none in its bin).
SPARK_SUBMIT = next((path for path in (BIN / "spark-submit", PYSPARK_HOME / "bin" / "spark-submit")
                     if path.exists()), BIN / "spark-submit")
DEFAULT_TIMEOUT = 300.0


# -- the programs ------------------------------------------------------------------------------


class Rule(Enum):
    """How two stdouts are compared."""

    EXACT = "exact"    # identical, line by line
    LINES = "lines"    # the same lines, in any order (a multiset)
    SHAPE = "shape"    # the same text once values and layout are masked (see ``shape``)
    KINDS = "kinds"    # masked line by line, as a set: each kind of line at least once
    SAMPLE = "sample"  # every line one of the program's ``population`` (a random sample)


@dataclass(frozen=True)
class Program:
    name: str                    # relative to EXAMPLES, e.g. "ml/pipeline_example.py"
    args: tuple[str, ...] = ()
    rule: Rule = Rule.EXACT
    why: str = ""                # why the rule is looser than EXACT
    population: frozenset[str] = frozenset()  # Rule.SAMPLE: the lines it may print

    @property
    def path(self) -> str:
        return f"{EXAMPLES}/{self.name}"


NEEDS_SOCKET = "streaming from a socket (`nc -lk`): needs a server feeding it, never ends"
EXCLUDED: dict[str, str] = {
    "avro_inputformat.py": "needs Spark's examples jar (AvroWrapperToJavaConverter) and "
                           "spark-avro, neither in the wheel; its users.avro is not shipped",
    "parquet_inputformat.py": "needs Spark's examples jar (IndexedRecordToJavaConverter) and "
                              "parquet-avro, neither in the wheel; its users.parquet is not "
                              "shipped",
    "sql/arrow.py": "needs pandas and pyarrow, not dependencies of clusterdeck",
    "sql/udtf.py": "needs pandas and pyarrow (checked at import), not dependencies",
    "sql/jdbc.py": "needs a JDBC database (an external service) and its driver jar",
    "sql/streaming/structured_blockchain_admission_control.py":
        "a Python streaming data source: Spark's Python data source worker imports pyarrow, "
        "not a dependency",
    "sql/streaming/structured_kafka_wordcount.py":
        "needs a Kafka broker and the spark-sql-kafka package",
    "sql/streaming/structured_network_wordcount.py": NEEDS_SOCKET,
    "sql/streaming/structured_network_wordcount_session_window.py": NEEDS_SOCKET,
    "sql/streaming/structured_network_wordcount_windowed.py": NEEDS_SOCKET,
    "sql/streaming/structured_sessionization.py": NEEDS_SOCKET,
    "streaming/network_wordcount.py": NEEDS_SOCKET,
    "streaming/network_wordjoinsentiments.py": NEEDS_SOCKET,
    "streaming/recoverable_network_wordcount.py": NEEDS_SOCKET,
    "streaming/sql_network_wordcount.py": NEEDS_SOCKET,
    "streaming/stateful_network_wordcount.py": NEEDS_SOCKET,
    "streaming/hdfs_wordcount.py": "streams a directory until killed (awaitTermination "
                                   "without a timeout): never ends by itself",
    "mllib/streaming_linear_regression_example.py":
        "streams two directories until killed (awaitTermination without a timeout)",
}

NUMERIC = ("results are doubles whose last digits depend on the order in which partitions "
           "arrive, many come from an unseeded randomSplit, and show() cuts cells by value")
RANDOM = "unseeded random numbers: the value differs on every run"
SHUFFLED = "prints a collect() after a shuffle: the order of the keys is not defined"
TIMING = "prints what it sees while polling the status API: how often depends on timing"
TREE = ("prints a tree learned from an unseeded randomSplit: its size differs between any "
        "two runs")

FOLDER_RULES: dict[str, tuple[Rule, str]] = {
    "ml": (Rule.SHAPE, NUMERIC),
    "mllib": (Rule.SHAPE, NUMERIC),
}

PROGRAMS: dict[str, Program] = {program.name: program for program in (
    Program("kmeans.py", ("data/mllib/kmeans_data.txt", "2", "0.1")),
    Program("logistic_regression.py", ("data/mllib/sample_lda_data.txt", "5"), Rule.SHAPE,
            RANDOM + " (the initial weights)"),
    Program("pagerank.py", ("data/mllib/pagerank_data.txt", "10"), Rule.LINES, SHUFFLED),
    Program("pi.py", ("4",), Rule.SHAPE, RANDOM),
    Program("sort.py", ("data/mllib/sample_lda_data.txt",)),
    Program("status_api_demo.py", (), Rule.KINDS, TIMING),
    Program("wordcount.py", ("data/streaming/AFINN-111.txt",), Rule.LINES, SHUFFLED),
    Program("streaming/queue_stream.py", (), Rule.KINDS,
            "one block per one-second batch, stamped with the time; how many batches run "
            "in its 6 s depends on the machine"),
    Program("ml/dataframe_example.py", ("data/mllib/sample_libsvm_data.txt",), Rule.SHAPE,
            "prints the path of a temporary folder"),
    Program("mllib/gaussian_mixture_model.py", ("data/mllib/gmm_data.txt", "2"), Rule.SHAPE,
            RANDOM + " (its default seed)"),
    Program("mllib/kmeans.py", ("data/mllib/kmeans_data.txt", "2"), Rule.SHAPE, NUMERIC),
    Program("mllib/logistic_regression.py", ("data/mllib/sample_svm_data.txt", "10"),
            Rule.SHAPE, NUMERIC),
    *(Program(f"mllib/{name}_example.py", (), Rule.KINDS, TREE) for name in (
        "decision_tree_classification", "decision_tree_regression",
        "gradient_boosting_classification", "gradient_boosting_regression",
        "random_forest_classification", "random_forest_regression")),
    Program("mllib/word2vec.py", ("data/streaming/AFINN-111.txt",), Rule.SHAPE, NUMERIC),
    Program("mllib/stratified_sampling_example.py", (), Rule.SAMPLE,
            "prints an unseeded sampleByKey of six pairs: which ones differs on every run",
            frozenset(str(pair) for pair in ((1, "a"), (1, "b"), (2, "c"), (2, "d"),
                                             (2, "e"), (3, "f")))),
)}


def discover() -> list[str]:
    """Every example program of the installed wheel, relative to EXAMPLES, sorted."""
    root = PYSPARK_HOME / EXAMPLES
    return sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                  if path.name != "__init__.py" and "__pycache__" not in path.parts)


def program(name: str) -> Program:
    """The program as run here: its arguments and rule from ``PROGRAMS``, else its
    folder's rule with no arguments."""
    if name in PROGRAMS:
        return PROGRAMS[name]
    rule, why = FOLDER_RULES.get(name.split("/")[0], (Rule.EXACT, ""))
    return Program(name, (), rule, why)


def unknown_names() -> set[str]:
    """Names in the tables that the installed wheel does not ship (a newer pyspark)."""
    return (set(EXCLUDED) | set(PROGRAMS)) - set(discover())


# -- comparing stdout ----------------------------------------------------------------------------


_CUT_CELL = re.compile(r"(?<=\|)[^|]*\.\.\.(?=\|)")
_UID = re.compile(r"(?<=[A-Za-z]_)[0-9a-f]{12}\b")
_TEMP_PATH = re.compile(re.escape(tempfile.gettempdir()) + r"/[\w.-]+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NUMBER_RUN = re.compile(r"#(?:[,;:]*#)+")
_DASHES = re.compile(r"-{2,}")
_SPACE = re.compile(r"\s+")


def shape(text: str) -> str:
    """Text with its values and layout masked: a table cell that ``show()`` cut at 20
    characters (``|[{1, 0.5}, {2,...|``: whether and where it is cut depends on the
    values) and numbers (decimal, signed, exponent) become ``#``; temporary paths,
    ML uids (``LogisticRegression_4f1a0c2b9e7d``) and hex ids become ``<tmp>``, ``<uid>``
    and ``#``; white space (padding, line breaks: numpy wraps an array by
    the width of its numbers) goes; then a run of numbers (a vector) becomes one ``#`` and
    a run of dashes (a table border) ``--``. What is left is the wording and the order of
    what was printed."""
    text = _CUT_CELL.sub("#", text)
    text = _UID.sub("<uid>", _TEMP_PATH.sub("<tmp>", text))
    text = _NUMBER.sub("#", _HEX.sub("#", text))
    text = _NUMBER_RUN.sub("#", _SPACE.sub("", text))
    return _DASHES.sub("--", text)


def same_stdout(rule: Rule, reference: str, candidate: str,
                population: frozenset[str] = frozenset()) -> bool:
    ours, theirs = reference.splitlines(), candidate.splitlines()
    if rule is Rule.SAMPLE:
        return set(ours) <= population and set(theirs) <= population
    if rule is Rule.EXACT:
        return ours == theirs
    if rule is Rule.LINES:
        return Counter(ours) == Counter(theirs)
    if rule is Rule.SHAPE:
        return shape(reference) == shape(candidate)
    return {shape(x) for x in ours} == {shape(x) for x in theirs}


def first_difference(rule: Rule, reference: str, candidate: str) -> str:
    """Where two stdouts part, in one line for the table."""
    ours, theirs = reference.splitlines(), candidate.splitlines()
    if rule is Rule.SHAPE:
        left, right = shape(reference), shape(candidate)
        at = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b),
                  min(len(left), len(right)))
        start = max(0, at - 30)
        return (f"shapes part at {at}: spark-submit {left[start:at + 30]!r}, "
                f"clusterdeck {right[start:at + 30]!r}")
    if rule is Rule.LINES:
        missing = sorted((Counter(ours) - Counter(theirs)).elements())
        extra = sorted((Counter(theirs) - Counter(ours)).elements())
    elif rule is Rule.KINDS:
        kinds, other = {shape(x) for x in ours}, {shape(x) for x in theirs}
        missing, extra = sorted(kinds - other), sorted(other - kinds)
    else:
        for number, (left, right) in enumerate(zip(ours, theirs, strict=False), 1):
            if left != right:
                return f"line {number}: spark-submit {left!r}, clusterdeck {right!r}"
        return f"{len(ours)} lines under spark-submit, {len(theirs)} under clusterdeck"
    return (f"{len(missing)} line(s) only under spark-submit (first {_clip(missing)}), "
            f"{len(extra)} only under clusterdeck (first {_clip(extra)})")


def _clip(lines: list[str]) -> str:
    shown = [line for line in lines if line.strip()] or lines
    return repr(shown[0][:80]) if shown else "-"


# -- running a program ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    exit_code: int | None        # None: stopped at the timeout
    seconds: float
    stdout: str
    stderr: str

    def describe(self) -> str:
        status = "timeout" if self.exit_code is None else f"exit {self.exit_code}"
        return f"{status}, {self.seconds:.1f} s"


def run_command(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float) -> Run:
    """``argv`` in its own process group, which is killed at ``timeout`` (and by the
    kernel if this process dies first)."""
    started = time.monotonic()
    process = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, preexec_fn=_die_with_parent_hook())
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        code = None
    finally:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # also what it left behind in its group
    if code is None:
        stdout, stderr = process.communicate()
    return Run(code, time.monotonic() - started, stdout.decode("utf-8", "replace"),
               stderr.decode("utf-8", "replace"))


def command_env(**extra: str) -> dict[str, str]:
    """This environment with the virtualenv's commands first on PATH and its Python for
    Spark's Python processes. Python's string hashing is left as each side sets it, as a
    user starts them: spark-submit seeds its driver with 0, and so does a TaskManager
    (Spark ML's estimators take their default seed from ``hash()`` of their class name)."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            **extra}


DRIVER = """\
#!/bin/sh
# The Python driver of spark-submit, with its stderr kept apart from its stdout.
exec "$CONFORMANCE_PYTHON" "$@" 2>"$CONFORMANCE_DRIVER_STDERR"
"""


def spark_submit(entry: Program, timeout: float = DEFAULT_TIMEOUT) -> Run:
    """The program under ``spark-submit --master local[2]``. spark-submit merges its Python
    driver's stderr into its stdout (PythonRunner redirects the error stream); clusterdeck
    keeps the script's stderr on stderr, as ``python script.py`` does. So the driver runs
    through ``DRIVER`` (``PYSPARK_DRIVER_PYTHON``), which sends its stderr to a file: the
    run's stdout is the script's stdout alone, its stderr Spark's log followed by the
    script's stderr."""
    with tempfile.TemporaryDirectory(prefix="conformance-driver-") as folder:
        driver, stderr = Path(folder, "python"), Path(folder, "stderr")
        driver.write_text(DRIVER, encoding="utf-8")
        driver.chmod(0o755)
        env = command_env(PYSPARK_DRIVER_PYTHON=str(driver), CONFORMANCE_PYTHON=sys.executable,
                          CONFORMANCE_DRIVER_STDERR=str(stderr))
        with cleaned(PYSPARK_HOME):
            run = run_command([str(SPARK_SUBMIT), "--master", "local[2]", entry.path,
                               *entry.args], PYSPARK_HOME, env, timeout)
        script_stderr = stderr.read_text("utf-8", "replace") if stderr.exists() else ""
    return Run(run.exit_code, run.seconds, run.stdout, run.stderr + script_stderr)


def _entries(root: Path) -> set[Path]:
    found: set[Path] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.update(Path(folder, name) for name in (*dirs, *files))
    return found


@contextmanager
def cleaned(root: Path) -> Iterator[None]:
    """Remove what appears in ``root`` meanwhile (an example's saved models, Parquet
    output, ``spark-warehouse``); ``__pycache__`` folders are left alone."""
    before = _entries(root)
    try:
        yield
    finally:
        for path in sorted(_entries(root) - before, key=lambda p: len(p.parts)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with suppress(FileNotFoundError):
                    path.unlink()


WARM_UP = """\
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
print(spark.range(3).count())
"""


class Cluster:
    """``clusterdeck up --taskmanagers 1 --slots 2`` in a fresh CLUSTERDECK_HOME, and
    ``clusterdeck submit`` to it. ``start`` returns once a warm-up script has run (its
    TaskManager's Spark is up); ``stop`` ends every process of the cluster, also when
    ``start`` failed half way. ``check`` runs the warm-up script again: a program that
    leaves the TaskManager's Spark unusable (``StreamingContext.stop(stopSparkContext=
    True)`` stops its SparkContext) is found out, and ``restart`` gives the next program
    a new cluster. Used from one thread."""

    def __init__(self, slots: int = 2) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="clusterdeck-conformance-"))
        self.cluster_id = f"conformance-{uuid.uuid4().hex[:6]}"
        self.env = command_env(CLUSTERDECK_HOME=str(self.home))
        self.slots = slots
        self.log = self.home / "up.log"
        self.up: subprocess.Popen[bytes] | None = None
        self.started_s = self.warm_up_s = 0.0

    def command(self, *args: str) -> list[str]:
        """The installed ``clusterdeck`` command, as a user runs it."""
        return [str(BIN / "clusterdeck"), *args]

    def start(self, timeout: float = 180.0) -> None:
        started = time.monotonic()
        with self.log.open("wb") as log:
            self.up = subprocess.Popen(
                self.command("up", "--cluster", self.cluster_id, "--taskmanagers", "1",
                             "--slots", str(self.slots)),
                cwd=self.home, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent_hook())
        deadline = started + timeout
        while b"cluster running" not in self.log.read_bytes():
            if self.up.poll() is not None:
                raise RuntimeError(f"clusterdeck up exited with {self.up.returncode}:\n"
                                   f"{self.log.read_text(errors='replace')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"clusterdeck up not running after {timeout:g} s:\n"
                                   f"{self.log.read_text(errors='replace')}")
            time.sleep(0.2)
        self.started_s = time.monotonic() - started
        run = self._warm_up(max(1.0, deadline - time.monotonic()))
        if run.exit_code != 0 or run.stdout.strip() != "3":
            raise RuntimeError(f"the warm-up script failed ({run.describe()}):\n"
                               f"{run.stdout}{run.stderr}")
        self.warm_up_s = run.seconds

    def _warm_up(self, timeout: float) -> Run:
        script = self.home / "warm_up.py"
        script.write_text(WARM_UP, encoding="utf-8")
        return run_command(self.command("submit", str(script), "--cluster", self.cluster_id,
                                        "--restart-strategy", "none"),
                           self.home, self.env, timeout)

    def check(self, timeout: float = 120.0) -> str:
        """Empty when the warm-up script still runs; else how it failed."""
        run = self._warm_up(timeout)
        if run.exit_code == 0 and run.stdout.strip() == "3":
            return ""
        return failure(run) if run.exit_code != 0 else f"printed {run.stdout.strip()!r}"

    def restart(self) -> None:
        self._stop_up()
        self.start()

    def submit(self, entry: Program, timeout: float = DEFAULT_TIMEOUT) -> Run:
        """The program as ``clusterdeck submit`` runs it: one run only (a failed script
        is not restarted), the task failed by the cluster itself at ``timeout``."""
        argv = self.command("submit", entry.path, "--cluster", self.cluster_id,
                            "--restart-strategy", "none", "--task-timeout", f"{timeout:g}",
                            "--", *entry.args)
        with cleaned(PYSPARK_HOME):
            return run_command(argv, PYSPARK_HOME, self.env, timeout + 60)

    def stop(self) -> None:
        """Ctrl-C to ``up`` (it stops its processes), SIGKILL to its group after 60 s;
        then the home goes."""
        self._stop_up()
        shutil.rmtree(self.home, ignore_errors=True)

    def _stop_up(self) -> None:
        if self.up is not None and self.up.poll() is None:
            with suppress(ProcessLookupError):
                self.up.send_signal(signal.SIGINT)
            with suppress(subprocess.TimeoutExpired):
                self.up.wait(60)
        if self.up is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.up.pid, signal.SIGKILL)
            self.up.wait(10)
        self.up = None

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- verdicts ------------------------------------------------------------------------------------


class Verdict(Enum):
    PASSES = "passes"                 # spark-submit exit 0, clusterdeck the same, same stdout
    DIFFERS = "differs"               # exit status or stdout not as under spark-submit
    FAILS_BOTH = "fails under both"   # spark-submit fails too, and so does clusterdeck
    EXCLUDED = "excluded"


@dataclass(frozen=True)
class Outcome:
    name: str
    args: tuple[str, ...]
    rule: str
    verdict: Verdict
    note: str
    spark_submit: str = ""     # "exit 0, 12.3 s"
    clusterdeck: str = ""
    spark_submit_s: float | None = None
    clusterdeck_s: float | None = None


_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit)\b:?.*$",
                    re.MULTILINE)


_ROOT_CAUSE = re.compile(r"^root cause[^:]*\): (.*)$", re.MULTILINE)


def error_line(stderr: str) -> str:
    """The last exception line of a traceback in ``stderr`` (with the Java exception
    that py4j puts on the next line), else the exception of clusterdeck's ``root cause``
    line; shortened for the table."""
    found = list(_ERROR.finditer(stderr))
    if found:
        last = found[-1]
        line = last.group(0)
        following = stderr[last.end() + 1:].split("\n", 1)[0]
        if following.startswith(": "):
            line = f"{line} {following[2:]}"
    elif causes := _ROOT_CAUSE.findall(stderr):
        line = causes[-1]
    else:
        return "no exception on stderr"
    line = line.replace(str(PYSPARK_HOME), "<pyspark>").replace("file:", "")
    return line if len(line) <= 200 else line[:197] + "..."


def failure(run: Run) -> str:
    """Why a run failed, in one line."""
    if run.exit_code is None:
        return f"did not end within {run.seconds:.0f} s"
    return error_line(run.stderr)


def judge(entry: Program, reference: Run, candidate: Run, cluster_after: str = "") -> Outcome:
    """The verdict on two runs; ``cluster_after`` is how the next script failed on the
    cluster the program ran on (empty: it ran)."""
    verdict, note = Verdict.PASSES, ""
    if reference.exit_code != 0:
        if candidate.exit_code == 0:
            verdict = Verdict.DIFFERS
            note = f"clusterdeck succeeds where spark-submit fails: {failure(reference)}"
        else:
            verdict = Verdict.FAILS_BOTH
            same = "same exit status" if reference.exit_code == candidate.exit_code \
                else f"under clusterdeck: {failure(candidate)}"
            output = "same stdout" if same_stdout(entry.rule, reference.stdout,
                                                  candidate.stdout, entry.population) \
                else "stdout differs"
            note = f"{failure(reference)} ({same}; {output})"
            if "examples/src/main/resources" in reference.stderr:
                note = f"missing resource: {note}"
    elif candidate.exit_code != 0:
        verdict, note = Verdict.DIFFERS, f"fails under clusterdeck: {failure(candidate)}"
    elif not same_stdout(entry.rule, reference.stdout, candidate.stdout, entry.population):
        verdict = Verdict.DIFFERS
        note = first_difference(entry.rule, reference.stdout, candidate.stdout)
    elif reference.stdout == candidate.stdout and entry.rule is not Rule.EXACT:
        note = "stdout identical"
    if cluster_after:
        verdict = Verdict.DIFFERS
        note = "; ".join(filter(None, (f"leaves the TaskManager's Spark unusable: the next "
                                       f"script fails with {cluster_after}", note)))
    return Outcome(entry.name, entry.args, entry.rule.value, verdict, note,
                   reference.describe(), candidate.describe(), reference.seconds,
                   candidate.seconds)


def excluded(name: str) -> Outcome:
    return Outcome(name, (), "-", Verdict.EXCLUDED, EXCLUDED[name])


def compare(entry: Program, cluster: Cluster, timeout: float = DEFAULT_TIMEOUT,
            results: Path | None = None) -> Outcome:
    """One program under spark-submit, then under clusterdeck, then a check that the
    cluster still runs a script (restarted when not); the runs are appended to
    ``results`` when given."""
    reference = spark_submit(entry, timeout)
    candidate = cluster.submit(entry, timeout)
    cluster_after = cluster.check()
    if cluster_after:
        cluster.restart()
    if results is not None:
        record(results, entry, reference, candidate, cluster_after)
    return judge(entry, reference, candidate, cluster_after)


# -- the table -----------------------------------------------------------------------------------


def table(outcomes: Iterable[Outcome]) -> str:
    rows = [(f"`{o.name}`", " ".join(o.args) or "-", o.spark_submit or "-",
             o.clusterdeck or "-", o.rule, o.verdict.value, o.note) for o in outcomes]
    return markdown_table(("program", "arguments", "spark-submit", "clusterdeck", "rule",
                           "verdict", "note"), rows)


def summary(outcomes: Sequence[Outcome]) -> str:
    counts = Counter(o.verdict for o in outcomes)
    ran = [o for o in outcomes if o.spark_submit_s is not None]
    spark_total = sum(o.spark_submit_s or 0.0 for o in ran)
    ours_total = sum(o.clusterdeck_s or 0.0 for o in ran)
    return (", ".join(f"{counts[v]} {v.value}" for v in Verdict) +
            f"; {len(ran)} run: spark-submit {spark_total:.0f} s, clusterdeck "
            f"{ours_total:.0f} s in all")


def record(path: Path, entry: Program, reference: Run, candidate: Run,
           cluster_after: str) -> None:
    """Append both runs of a program to ``path``, to be judged again by ``load``."""
    with path.open("a", encoding="utf-8") as results:
        results.write(json.dumps({"name": entry.name, "args": entry.args,
                                  "spark_submit": asdict(reference),
                                  "clusterdeck": asdict(candidate),
                                  "cluster_after": cluster_after}) + "\n")


def load(path: Path) -> list[Outcome]:
    """The outcomes of the runs ``record`` appended (by one or more runs of this script),
    judged by the rules as they are now, with the exclusions for programs not run; a later
    line for a program wins. Programs neither run nor excluded are left out."""
    runs: dict[str, tuple[Program, Run, Run, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            fields = json.loads(line)
            entry = program(fields["name"])
            if tuple(fields["args"]) != entry.args:
                entry = Program(entry.name, tuple(fields["args"]), entry.rule, entry.why)
            runs[entry.name] = (entry, Run(**fields["spark_submit"]),
                                Run(**fields["clusterdeck"]), fields.get("cluster_after", ""))
    return [excluded(name) if name in EXCLUDED else judge(*runs[name])
            for name in discover() if name in EXCLUDED or name in runs]


def matches(name: str, pattern: str) -> bool:
    """Glob matching as a shell does it: ``*`` stays inside one folder."""
    parts, globs = name.split("/"), pattern.split("/")
    return len(parts) == len(globs) and all(
        fnmatch.fnmatchcase(part, glob) for part, glob in zip(parts, globs, strict=True))


def selected(patterns: Sequence[str] | None) -> list[str]:
    """The programs matching ``patterns``, in the order of the patterns (each once)."""
    names = discover()
    if not patterns:
        return names
    chosen = {name: None for pattern in patterns for name in names if matches(name, pattern)}
    return list(chosen)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="GLOB",
                        help="programs to run, as globs relative to the examples folder")
    parser.add_argument("--results", type=Path, metavar="FILE",
                        help="append each outcome to FILE as a JSON line")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds per run before it is stopped (default %(default)g)")
    parser.add_argument("--table-from", type=Path, metavar="FILE",
                        help="print the table of a --results file and exit")
    args = parser.parse_args(argv)
    if args.table_from:
        outcomes = load(args.table_from)
        print(table(outcomes))
        print(f"\n{summary(outcomes)}")
        return 0
    if unknown := unknown_names():
        print(f"note: the tables name programs this pyspark does not ship: "
              f"{sorted(unknown)}", file=sys.stderr)
    exit_on_sigterm()
    names = selected(args.only)
    outcomes: list[Outcome] = []
    print(f"# pyspark {pyspark.__version__} examples, {time.strftime('%Y-%m-%d %H:%M %Z')}\n"
          f"{machine_summary()}\n", flush=True)
    with Cluster() as cluster:
        print(f"cluster up in {cluster.started_s:.1f} s, warm-up script "
              f"{cluster.warm_up_s:.1f} s", file=sys.stderr, flush=True)
        for name in names:
            if name in EXCLUDED:
                outcome = excluded(name)
            else:
                outcome = compare(program(name), cluster, args.timeout, args.results)
            print(f"{outcome.verdict.value:>16}  {name}  ({outcome.spark_submit or '-'} | "
                  f"{outcome.clusterdeck or '-'})  {outcome.note}", file=sys.stderr,
                  flush=True)
            outcomes.append(outcome)
    print(table(outcomes))
    print(f"\n{summary(outcomes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
