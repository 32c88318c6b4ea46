"""The installed layout and the layers: one top-level name, and import contracts that hold
(and that really fail when a lower layer imports a higher one)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOMS = ("core", "gui", "broker")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(config: Path, cwd: Path, env: dict[str, str] | None = None,
                 ) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_every_package_folder_is_installed() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    folders = {"clusterdeck." + ".".join(init.parent.relative_to(REPO).parts)
               for room in ROOMS for init in (REPO / room).rglob("__init__.py")}
    assert listed == folders


@pytest.mark.integration
def test_the_wheel_installs_one_top_level_name(tmp_path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for room in ROOMS:
        shutil.copytree(REPO / room, source / room,
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("clusterdeck-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"clusterdeck"}
    modules = {name for name in names if name.endswith(".py")}
    for room in ROOMS:
        for path in (REPO / room).rglob("*.py"):
            assert f"clusterdeck/{room}/{path.relative_to(REPO / room)}" in modules


@pytest.mark.integration
def test_the_import_contracts_hold() -> None:
    result = lint_imports(REPO / "pyproject.toml", REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def copy_of_the_tree(tmp_path) -> Path:
    """The three rooms under a ``clusterdeck`` namespace folder first on PYTHONPATH, so the
    copy, not the editable install, is what import-linter reads."""
    package = tmp_path / "clusterdeck"
    package.mkdir()
    for room in ROOMS:
        shutil.copytree(REPO / room, package / room, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.integration
@pytest.mark.parametrize(("module", "violation", "complaint"), [
    ("core/rpc/_errors.py", "from clusterdeck.core.protocol import topics",
     "clusterdeck.core.rpc is not allowed to import clusterdeck.core.protocol"),
    ("broker/limits.py", "from clusterdeck.core.config import paths",
     "clusterdeck.broker is not allowed to import clusterdeck.core.config"),
    ("core/cli/main.py", "from clusterdeck.gui import app",
     "clusterdeck.core.cli is not allowed to import clusterdeck.gui"),
    ("core/engine/streams.py", "import PySide6",
     "clusterdeck.core.engine.streams -> PySide6"),
])
def test_a_lower_layer_importing_a_higher_one_breaks_the_contracts(
        copy_of_the_tree, module, violation, complaint) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy_of_the_tree)}
    clean = lint_imports(copy_of_the_tree / "pyproject.toml", copy_of_the_tree, env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    target = copy_of_the_tree / "clusterdeck" / module
    target.write_text(target.read_text() + f"\n{violation}  # noqa\n")
    broken = lint_imports(copy_of_the_tree / "pyproject.toml", copy_of_the_tree, env)
    assert broken.returncode != 0
    assert complaint in " ".join(broken.stdout.split()), broken.stdout


@pytest.mark.integration
def test_the_code_is_ruff_clean() -> None:
    """What STYLE asks of every change, checked in CI like the import contracts."""
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--no-cache", str(REPO)], cwd=REPO,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
