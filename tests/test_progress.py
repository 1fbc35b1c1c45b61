"""Progress: a bar on a terminal, a plain line per 10% elsewhere, nothing with --json; the main job reports it."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grebench.progress import NoProgress, PlainProgress, RichProgress, progress_for


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_every_tenth_with_counts_and_eta() -> None:
    out = io.StringIO()
    with PlainProgress(out).task("score", 40, "requests") as task:
        for _ in range(40):
            task.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 10  # 10%, 20%, ... 90%, then the final line
    assert lines[0].startswith("score: 4/40 requests (10%)") and "ETA" in lines[0]
    assert lines[-1].startswith("score: 40/40 requests (100%)") and lines[-1].endswith("(done)")
    assert "ETA" not in lines[-1]


def test_the_eta_is_the_rate_measured_after_the_first_advance(monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoding whose first step came after a 20 s prefill, then 1 s a step: the ETA at 10 % is the 90 steps
    left at 1 s each, not the 20 s start spread over every step (issue 47 §5)."""
    from grebench import progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    with PlainProgress(out).task("decoding", 100, "tokens") as task:
        clock[0] += 20.0  # the prefill: nothing advanced
        for _ in range(10):
            clock[0] += 1.0
            task.advance()
    first = out.getvalue().splitlines()[0]
    assert first.startswith("decoding: 10/100 tokens (10%), 30 s elapsed") and first.endswith("ETA 1.5 min"), first
    # 9 steps in 9 s after the first: 90 s left (the start-based rate would say 90 x 3 s = 4.5 min)


def test_plain_lines_without_a_total_double_their_step() -> None:
    out = io.StringIO()
    with PlainProgress(out).task("ingest bundled", None, "papers") as task:
        task.advance(450)
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == ["ingest bundled: 450 papers"] * 2


def test_the_display_follows_the_output() -> None:
    assert isinstance(progress_for(as_json=True, stream=_Terminal()), NoProgress)
    assert isinstance(progress_for(as_json=False, stream=_Terminal()), RichProgress)
    assert isinstance(progress_for(as_json=False, stream=io.StringIO()), PlainProgress)


def _run(archive: Path, data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GREBENCH_DATA_DIR": str(data), "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.run([sys.executable, "-m", "grebench.cli", "run", "--source", f"archive:{archive}",
                           "--estimator", "offline", *extra], env=env, capture_output=True, text=True, timeout=600)


def test_main_job_reports_progress_in_a_log_and_nothing_with_json(tmp_path: Path) -> None:
    from grebench.ingest import bundled_path

    archive = tmp_path / "small.jsonl"
    archive.write_text("".join(bundled_path().read_text(encoding="utf-8").splitlines(keepends=True)[:12]),
                       encoding="utf-8")  # 12 papers
    logged = _run(archive, tmp_path / "a")
    assert logged.returncode == 0, logged.stderr[-2000:]
    for stage in ("[ingest]", "[bench]", "[score]", "[boards]", "[validate]", "[panel]", "[site]"):
        assert stage in logged.stderr
    assert re.search(r"^score: \d+/\d+ requests \(100%\), .* elapsed \(done\)$", logged.stderr, re.MULTILINE)
    assert re.search(r"^bench: human baseline and controls: \d+/\d+ reviews \(\d+%\), .*ETA", logged.stderr,
                     re.MULTILINE)
    quiet = _run(archive, tmp_path / "b", "--json")
    assert quiet.returncode == 0 and json.loads(quiet.stdout)["stages"]["score"]["pairs_scored"] > 0
    assert "ETA" not in quiet.stderr and "[score]" not in quiet.stderr and "elapsed" not in quiet.stderr


def test_a_task_whose_items_failed_never_ends_done() -> None:
    """Issue 64: a dead judge's line ended "8/8 answers (100 %) (done)"; it now says how many failed."""
    out = io.StringIO()
    with PlainProgress(out).task("panel: votes of dead", 8, "answers") as task:
        task.advance(4, failed=4)
        task.advance(4, failed=4)
    last = out.getvalue().splitlines()[-1]
    assert last.endswith("8 failed (failed)") and "(done)" not in last, last
    out = io.StringIO()
    with PlainProgress(out).task("panel: votes of flaky", 8, "answers") as task:
        task.advance(8, failed=3)
    last = out.getvalue().splitlines()[-1]
    assert last.endswith(", 3 failed (done with failures)"), last
    out = io.StringIO()
    with PlainProgress(out).task("panel: votes of fine", 8, "answers") as task:
        task.advance(8)
    assert out.getvalue().splitlines()[-1].endswith("(done)")
