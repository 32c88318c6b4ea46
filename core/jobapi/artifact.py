"""A job's artifact (Flink's job JAR): the job file and the sibling modules it imports.

The client packs it, uploads it to the Dispatcher in chunks and names it by its SHA-256;
each TaskManager fetches it, checks the checksum, unpacks it into a folder of its own and
loads the job file from there. Only Python source travels, never pickled code.

The archive is a zip with fixed timestamps and permissions and sorted entries, so the
same files always give the same bytes and the same checksum. Which siblings go in is read
from the import statements (transitively): ``import helpers`` takes ``helpers.py`` or the
package folder ``helpers/`` from the job's folder. Data files are not packed: paths in a
job are resolved on the submitting machine and must be readable where tasks run.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ARTIFACT_FORMAT = 1
MANIFEST = "clusterdeck-artifact.json"
_TIMESTAMP = (1980, 1, 1, 0, 0, 0)


class ArtifactError(ValueError):
    """An artifact that cannot be unpacked: wrong checksum, not ours, unsafe paths."""


@dataclass(frozen=True)
class JobArtifact:
    """The packed job: ``entry`` is the job file's name inside ``data`` (a zip)."""

    entry: str
    data: bytes
    sha256: str

    def chunks(self, chunk_size: int) -> Iterator[bytes]:
        """The bytes in pieces of at most ``chunk_size``, in order, for a chunked upload."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        for offset in range(0, len(self.data), chunk_size):
            yield self.data[offset:offset + chunk_size]


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pack_artifact(job_file: str | os.PathLike[str]) -> JobArtifact:
    """Pack a job file and the sibling .py modules and packages it imports."""
    job_file = Path(job_file).resolve()
    folder = job_file.parent
    files = sorted({job_file, *sibling_files(job_file)})
    names = [path.relative_to(folder).as_posix() for path in files]
    manifest = {"format": ARTIFACT_FORMAT, "entry": job_file.name, "files": names}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        _add(archive, MANIFEST, json.dumps(manifest, sort_keys=True).encode())
        for name, path in zip(names, files, strict=True):
            _add(archive, name, path.read_bytes())
    data = buffer.getvalue()
    return JobArtifact(job_file.name, data, sha256_of(data))


def _add(archive: zipfile.ZipFile, name: str, content: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_TIMESTAMP)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, content)


def unpack_artifact(data: bytes, dest: str | os.PathLike[str],
                    sha256: str | None = None) -> Path:
    """Unpack into ``dest`` (created) and return the job file's path there. Raises
    ArtifactError when ``sha256`` does not match or the archive is not a job artifact."""
    if sha256 is not None and sha256_of(data) != sha256:
        raise ArtifactError(f"artifact checksum mismatch: expected {sha256}, "
                            f"got {sha256_of(data)}")
    dest = Path(dest)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ArtifactError(f"not a job artifact: {exc}") from None
    with archive:
        try:
            manifest = json.loads(archive.read(MANIFEST))
        except (KeyError, ValueError) as exc:
            raise ArtifactError(f"not a job artifact: no readable {MANIFEST}") from exc
        if manifest.get("format") != ARTIFACT_FORMAT:
            raise ArtifactError(f"unknown artifact format {manifest.get('format')!r}")
        for name in archive.namelist():
            target = _safe_target(dest, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))
    entry = dest / manifest["entry"]
    if not entry.is_file():
        raise ArtifactError(f"artifact entry {manifest['entry']!r} is missing")
    return entry


def _safe_target(dest: Path, name: str) -> Path:
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or "\\" in name or ".." in parts or ":" in parts[0]:
        raise ArtifactError(f"unsafe path in artifact: {name!r}")
    return dest.joinpath(*parts)


def sibling_files(job_file: str | os.PathLike[str]) -> list[Path]:
    """The .py files of the job's folder that the job imports, directly or through each
    other (a package folder counts with all its .py files)."""
    job_file = Path(job_file).resolve()
    folder = job_file.parent
    found: set[Path] = set()
    pending = [job_file]
    while pending:
        current = pending.pop()
        for name in _imported_names(current):
            module_file = folder / f"{name}.py"
            package = folder / name
            candidates = [module_file] if module_file.is_file() else (
                sorted(package.rglob("*.py")) if package.is_dir() else [])
            for candidate in candidates:
                if candidate not in found and candidate != job_file:
                    found.add(candidate)
                    pending.append(candidate)
    return sorted(found)


def _imported_names(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names
