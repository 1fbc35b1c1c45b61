"""The app's published downloads live in a folder of the system temp dir.  `grebench app` removes it when SIGTERM or
Ctrl-C stops it (`grebench serve` too: tests/scheduler/test_serve_stop.py); an app that is killed (SIGKILL, the OOM
killer) cannot, so the next app removes what a dead app left, and nothing of a live one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from grebench.site._app import DOWNLOADS_PREFIX, SnapshotDownloads, remove_orphaned_downloads
from tests.conftest import FAST_ENV
from tests.site.conftest import free_port

# A stand-in for `grebench app`: builds the real SnapshotDownloads, publishes one snapshot file, says where, and waits.
_APP = """
import sys, time
from pathlib import Path
from grebench.site._app import SnapshotDownloads
d = SnapshotDownloads(Path(sys.argv[1]))
listing = d.publish()
print(d.root, len(listing), flush=True)
time.sleep(600)
"""


def _start(source: Path, temp: Path) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", _APP, str(source)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)}, cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    line = proc.stdout.readline().split()  # the app has published: observed progress, not a sleep
    assert line, f"the stand-in app ended early ({proc.wait()})"
    return proc, Path(line[0])


def test_a_killed_apps_downloads_are_removed_by_the_next_app_and_a_live_apps_are_kept(tmp_path: Path) -> None:
    source = tmp_path / "snapshots" / "iclr-2026"
    source.mkdir(parents=True)
    (source / "manifest.json").write_text("{}")
    temp = tmp_path / "tmp"
    temp.mkdir()
    killed, killed_root = _start(source.parent, temp)
    live, live_root = _start(source.parent, temp)
    try:
        assert killed_root.parent == temp and killed_root.name.startswith(f"{DOWNLOADS_PREFIX}{killed.pid}-")
        assert any(killed_root.rglob("manifest.json"))
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert killed_root.is_dir()  # the finalizer never ran
        unrelated = temp / f"{DOWNLOADS_PREFIX}notapid-x"  # not of the form prefix-PID-: never touched
        unrelated.mkdir()
        before = tempfile.tempdir
        tempfile.tempdir = str(temp)
        try:
            downloads = SnapshotDownloads(source.parent)
        finally:
            tempfile.tempdir = before
        assert not killed_root.exists()
        assert live_root.is_dir() and any(live_root.rglob("manifest.json"))
        assert unrelated.is_dir() and downloads.root.is_dir()
        # and the sweep alone, again: nothing more to remove while the other app runs
        assert remove_orphaned_downloads(temp) == []
    finally:
        live.kill()
        live.wait(timeout=30)
        if killed.poll() is None:
            killed.kill()


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 0), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_grebench_app_stopped_by_a_signal_exits_with_its_status_and_removes_its_downloads(
        tmp_path: Path, signum: int, status: int) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    port = free_port()
    env = {**os.environ, **FAST_ENV, "TMPDIR": str(temp), "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "grebench.cli", "app", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 300  # a guard against a hang, not a speed test: polled until it answers
        while True:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=5, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the app never answered"
            time.sleep(0.2)
        published = list(temp.glob(f"{DOWNLOADS_PREFIX}{proc.pid}-*"))
        assert len(published) == 1 and published[0].is_dir()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == status, err[-3000:]
        assert not published[0].exists(), "the app's published downloads outlived it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
