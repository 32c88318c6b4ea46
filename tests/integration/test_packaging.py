"""The desktop bundle (packaging/): the frozen-mode helpers, the Java check, the desktop
files, and the real thing: packaging/build.sh builds the PyInstaller bundle and
packaging/smoke.sh runs it headless (about 5 minutes on 2 cores; see packaging/README.md).

packaging/ is not a Python package (a ``packaging`` package would shadow PyPA's), so
its modules are loaded here by path.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from clusterdeck.broker import mosquitto
from clusterdeck.core.cli import prereqs
from clusterdeck.core.node import frozen

PACKAGING = Path(__file__).resolve().parents[2] / "packaging"




@pytest.mark.parametrize(("argv", "expected"), [
    (["-m", "pyspark.daemon"], ("-m", "pyspark.daemon", [])),
    (["-u", "-m", "pyspark.daemon", "pyspark.worker"], ("-m", "pyspark.daemon",
                                                        ["pyspark.worker"])),
    (["-X", "faulthandler", "-c", "print(1)", "a"], ("-c", "print(1)", ["a"])),
    (["-mpyspark.worker"], ("-m", "pyspark.worker", [])),
    (["up", "--check"], None),
    (["-D", "broker.kind=amqtt", "up"], None),
    (["--config", "c.toml", "taskmanager"], None),
    (["--version"], None),
    (["-m"], None),
])
def test_a_python_command_line_is_told_from_a_clusterdeck_one(argv, expected) -> None:
    assert frozen.python_request(argv) == expected


def test_outside_a_bundle_children_run_python_m_core_cli() -> None:
    assert frozen.cli_argv("broker", "--config", "x") == [
        sys.executable, "-m", "clusterdeck.core.cli", "broker", "--config", "x"]
    assert frozen.run_as_python(["-m", "clusterdeck.core.cli"]) is None


def test_in_a_bundle_children_run_the_executable(monkeypatch) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert frozen.cli_argv("taskmanager", "--id", "tm") == [sys.executable, "taskmanager",
                                                            "--id", "tm"]


def test_in_a_bundle_the_executable_runs_python_modules_and_code(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert frozen.run_as_python(["-c", "import sys; print('hi', sys.argv[1:])", "x"]) == 0
    assert capsys.readouterr().out == "hi ['x']\n"
    assert frozen.run_as_python(["-c", "raise SystemExit(3)"]) == 3
    assert frozen.run_as_python(["-m", "json.tool", "--help"]) == 0
    assert frozen.run_as_python(["status"]) is None


def test_the_bundle_environment_is_undone_for_other_programs(monkeypatch, tmp_path) -> None:
    (tmp_path / "pyspark" / "jars").mkdir(parents=True)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    env = {"LD_LIBRARY_PATH": f"{tmp_path}:/opt/lib", "LD_LIBRARY_PATH_ORIG": "/opt/lib",
           "SPARK_HOME": "/elsewhere/spark", "PYSPARK_PYTHON": "python3",
           "PYSPARK_DRIVER_PYTHON": "ipython"}
    frozen.prepare_environment(env)
    assert env == {"LD_LIBRARY_PATH": "/opt/lib", "SPARK_HOME": str(tmp_path / "pyspark"),
                   "PYSPARK_PYTHON": sys.executable}
    env = {"LD_LIBRARY_PATH": str(tmp_path)}
    frozen.prepare_environment(env)
    assert "LD_LIBRARY_PATH" not in env


def test_outside_a_bundle_the_environment_is_left_alone() -> None:
    env = {"LD_LIBRARY_PATH": "/x", "SPARK_HOME": "/y"}
    frozen.prepare_environment(env)
    assert env == {"LD_LIBRARY_PATH": "/x", "SPARK_HOME": "/y"}


@pytest.mark.parametrize(("output", "major"), [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('java version "1.8.0_402"', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ('openjdk version "25-ea" 2025-09-16', 25),
    ("no version here", None),
])
def test_the_java_version_is_read_from_java_version(output: str, major: int | None) -> None:
    assert prereqs.java_major(output) == major


def test_a_missing_java_is_named_with_how_to_get_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    message = prereqs.check_java()
    assert message is not None
    assert "Java 17 or newer" in message and str(tmp_path) in message
    assert "install" in message.lower()


@pytest.mark.integration
def test_an_old_java_is_refused(monkeypatch, tmp_path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text('#!/bin/sh\necho \'java version "1.8.0_402"\' >&2\n')
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    message = prereqs.check_java()
    assert message is not None and "is Java 8" in message


def test_a_missing_mosquitto_is_a_notice_not_an_error() -> None:
    assert mosquitto.check_mosquitto(installed=True) is None
    notice = mosquitto.check_mosquitto(installed=False)
    assert notice is not None and "amqtt" in notice


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate (desktop-file-utils) is not installed")
def test_the_desktop_entry_is_valid() -> None:
    result = subprocess.run(["desktop-file-validate",
                             str(PACKAGING / "io.github.clusterdeck.desktop")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("appstreamcli") is None,
                    reason="appstreamcli (appstream) is not installed")
def test_the_appstream_metainfo_is_valid() -> None:
    result = subprocess.run(["appstreamcli", "validate", "--no-net",
                             str(PACKAGING / "io.github.clusterdeck.metainfo.xml")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_icons_are_there() -> None:
    icons = PACKAGING / "icons"
    assert (icons / "io.github.clusterdeck.svg").read_text().lstrip().startswith("<?xml")
    for size in (48, 128, 256):
        assert (icons / f"io.github.clusterdeck-{size}.png").read_bytes()[:8] == \
            b"\x89PNG\r\n\x1a\n"


@pytest.mark.integration
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get("CLUSTERDECK_SKIP_BUNDLE") == "1",
                    reason="CLUSTERDECK_SKIP_BUNDLE=1")
@pytest.mark.skipif(prereqs.check_java() is not None, reason="no Java 17+ for Spark")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="smoke.sh is for Linux")
def test_the_bundle_builds_and_runs_headless() -> None:
    build_dir = Path(tempfile.mkdtemp(prefix="clusterdeck-bundle-test-"))
    try:
        bundle = build_bundle(build_dir)
        env = {k: v for k, v in os.environ.items() if k != "CLUSTERDECK_HOME"}
        smoke = subprocess.run(["bash", str(PACKAGING / "smoke.sh"), str(bundle)],
                               capture_output=True, text=True, timeout=600, env=env,
                               check=False)
        assert smoke.returncode == 0, smoke.stderr[-8000:]
        assert "smoke: 9 passed, 0 failed" in smoke.stdout or \
            "smoke: 8 passed, 0 failed" in smoke.stdout, smoke.stdout + smoke.stderr[-3000:]
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


def build_bundle(build_dir: Path) -> Path:
    """build.sh into ``build_dir``, with its build venv kept in the user's cache between
    runs (as CI caches keep one): creating it and installing Spark, Qt and PyInstaller
    into it takes a quarter of the build, and build.sh still installs this checkout and
    its dependencies into it each time. One build at a time uses it; a venv a build
    fails with is built afresh once, in case an interrupted install broke it."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clusterdeck"
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / f"bundle-venv-py{sys.version_info.major}{sys.version_info.minor}"
    with (cache / "bundle-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for fresh in (False, True):
            if fresh:
                shutil.rmtree(venv, ignore_errors=True)
            build = subprocess.run(
                ["bash", str(PACKAGING / "build.sh"), "--python", sys.executable,
                 "--build-dir", str(build_dir), "--venv", str(venv)],
                capture_output=True, text=True, timeout=1500, check=False)
            if build.returncode == 0:
                return build_dir / "dist" / "clusterdeck"
        raise AssertionError(build.stderr[-5000:])
