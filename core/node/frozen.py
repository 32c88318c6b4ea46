"""What changes when clusterdeck runs as a PyInstaller bundle (``sys.frozen``).

In a bundle ``sys.executable`` is the bundle's own executable, not a Python interpreter,
so ``sys.executable -m clusterdeck.core.cli ...`` cannot start a child and Spark cannot start its
Python workers with ``PYSPARK_PYTHON=sys.executable -m pyspark.daemon``. The way out used
here: the bundle's executable behaves like the two things it is asked to be.

* ``clusterdeck broker|jobmanager|taskmanager ...``: the clusterdeck CLI, so the
  supervisor starts children as ``[sys.executable, COMMAND, ...]`` (``cli_argv``).
* ``clusterdeck -m MODULE ...`` / ``clusterdeck -c CODE ...`` (with Python's harmless
  flags such as ``-u`` before them): a Python interpreter running that module or code
  with the bundled modules (``run_as_python``). Spark runs its workers as
  ``PYSPARK_PYTHON -m pyspark.daemon`` (and ``-m pyspark.sql.worker.*`` for some SQL
  features), so the bundle's executable is a valid ``PYSPARK_PYTHON``.

``prepare_environment`` undoes what the PyInstaller bootloader does to the environment
(on Linux it points ``LD_LIBRARY_PATH`` at the bundle, which would make Java and
Mosquitto load the bundle's copies of libssl, libz, ...) and pins Spark to the bundled
copy. Nothing here imports clusterdeck or Qt; everything is a no-op outside a bundle.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import MutableMapping, Sequence
from pathlib import Path

# Python's own options that may precede -m/-c and change nothing we care about in a
# bundle (its interpreter is already isolated, unbuffered I/O is set up below).
_FLAGS = {"-u", "-E", "-s", "-S", "-B", "-I", "-P", "-O", "-OO", "-q", "-b", "-bb", "-d"}
_FLAGS_WITH_VALUE = {"-X", "-W"}


def is_frozen() -> bool:
    return bool(getattr(sys, "frozen", False))


def cli_argv(*command: str) -> list[str]:
    """The command line that runs ``clusterdeck COMMAND...`` with this installation."""
    if is_frozen():
        return [sys.executable, *command]
    return [sys.executable, "-m", "clusterdeck.core.cli", *command]


def bundle_dir() -> Path | None:
    """The folder holding the bundled modules and data (``_internal``), or None."""
    folder = getattr(sys, "_MEIPASS", None)
    return Path(folder) if is_frozen() and folder else None


def prepare_environment(environ: MutableMapping[str, str] | None = None) -> None:
    """Call first thing in the bundle's entry point; changes nothing outside a bundle.

    Children inherit the result: programs that are not the bundle (java, mosquitto, a
    user's tools) get the environment the user started us with, and
    Spark runs the bundled Spark with the bundle's executable as its Python.
    """
    if not is_frozen():
        return
    env = os.environ if environ is None else environ
    for name in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "DYLD_FRAMEWORK_PATH"):
        original = env.pop(f"{name}_ORIG", None)
        if original is not None:
            env[name] = original
        elif name in env and bundle_dir() is not None and str(bundle_dir()) in env[name]:
            # Set by the bootloader without an original: the user had none.
            parts = [p for p in env[name].split(os.pathsep) if p and p != str(bundle_dir())]
            if parts:
                env[name] = os.pathsep.join(parts)
            else:
                del env[name]
    if sys.platform == "win32":  # pragma: no cover - untested, see packaging/README.md
        import ctypes
        ctypes.windll.kernel32.SetDllDirectoryW(None)  # the bootloader's, inherited
    folder = bundle_dir()
    if folder is not None and (folder / "pyspark" / "jars").is_dir():
        # The bundled Python side only works with the bundled JVM side, whatever SPARK_HOME
        # or PYSPARK_PYTHON the user's shell has for another Spark.
        env["SPARK_HOME"] = str(folder / "pyspark")
        env["PYSPARK_PYTHON"] = sys.executable
        env.pop("PYSPARK_DRIVER_PYTHON", None)


def python_request(argv: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """``("-m", module, args)`` or ``("-c", code, args)`` when ``argv`` (without the
    program name) asks for a Python interpreter; None for a clusterdeck command line."""
    index = 0
    while index < len(argv):
        item = argv[index]
        if item in ("-m", "-c"):
            if index + 1 >= len(argv):
                return None
            return item, argv[index + 1], list(argv[index + 2:])
        if item.startswith(("-m", "-c")) and len(item) > 2:
            return item[:2], item[2:], list(argv[index + 1:])
        if item in _FLAGS:
            index += 1
        elif item in _FLAGS_WITH_VALUE:
            index += 2
        elif item[:2] in _FLAGS_WITH_VALUE and len(item) > 2:
            index += 1
        else:
            return None
    return None


def run_as_python(argv: Sequence[str] | None = None) -> int | None:
    """Act as ``python -m MODULE ...`` or ``python -c CODE ...`` when asked to (see
    ``python_request``) and return the exit status; None when ``argv`` is a clusterdeck
    command line. Only in a bundle: a real interpreter never gets here."""
    if not is_frozen():
        return None
    request = python_request(list(sys.argv[1:] if argv is None else argv))
    if request is None:
        return None
    kind, target, rest = request
    if "-u" in (sys.argv[1:] if argv is None else argv):
        for stream in (sys.stdout, sys.stderr):
            if stream is not None and hasattr(stream, "reconfigure"):
                stream.reconfigure(write_through=True)
    try:
        if kind == "-m":
            sys.argv = [target, *rest]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *rest]
            namespace = {"__name__": "__main__", "__builtins__": __builtins__}
            exec(compile(target, "<string>", "exec"), namespace)
    except SystemExit as exit_:
        code = exit_.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0
