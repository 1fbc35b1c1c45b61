"""Board history for every store (issue 51): ``grebench leaderboard --history`` over the dated board versions of a
store made the way ``serve`` makes one.

Before, history existed only for replays (``replay_history``): a store run by ``serve`` had dated versions but no
history view, no plot, and no ``leaderboard --history``.  Here two ``serve --once`` cycles (offline estimator, an
archive that gains papers between them) publish two versions; the history, its JSON and the site's plot read them.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.ingest import bundled_path
from tests.conftest import FAST_ENV


def _archive(path: Path, papers: int) -> Path:
    with bundled_path().open(encoding="utf-8") as src:
        path.write_text("".join(next(src) for _ in range(papers)), encoding="utf-8")
    return path


def _cli(data: Path, archive: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50",
                                   "GREBENCH_VENUES": f"archive:{archive}", "GREBENCH_EXAM_PAIRS": "10"})


def test_leaderboard_history_reads_the_versions_serve_published(tmp_path: Path) -> None:
    data, archive = tmp_path / "data", tmp_path / "season.jsonl"
    for papers in (4, 7):  # the second cycle finds more papers: new scores, a new board version
        _archive(archive, papers)
        cycle = _cli(data, archive, "serve", "--once", "--no-app", "--job", "poll", "--job", "score", "--job", "site")
        assert cycle.exit_code == 0, cycle.output

    result = _cli(data, archive, "leaderboard", "--history", "--json")
    assert result.exit_code == 0, result.output
    history = json.loads(result.stdout)
    [line] = [b for b in history["boards"] if b["estimator_spec"] == "offline"]
    assert line["scope"] == "all" and line["metric"] == "gem-s"
    points = line["points"]
    assert len(points) == 2 and points[0]["published_at"] < points[1]["published_at"]
    assert all(p["origin"] == "site" for p in points)
    papers = [max(r["papers"] for r in p["rows"]) for p in points]
    assert papers[0] < papers[1]  # the second version ranks on the papers the second poll brought
    human = [next(r for r in p["rows"] if r["candidate"] == "human") for p in points]
    assert all(r["rank"] is None and r["status"] == "reference" and r["ci95_low"] <= r["score"] <= r["ci95_high"]
               for r in human)  # the human baseline: a reference line, never ranked

    text = _cli(data, archive, "leaderboard", "--history")
    assert text.exit_code == 0, text.output
    assert "[all boards]: 2 version(s)" in text.output
    stamps = [line for line in text.output.splitlines() if line.startswith("  2")]
    assert len(stamps) == 2 and all(s.split(" (version ")[0].endswith(" UTC") and "." not in s.split(" (")[0]
                                    for s in stamps)  # to the second, no microseconds

    # the site's history plot is drawn from the same versions
    plots = list((data / "site" / "boards").glob("*-history.svg"))
    assert plots, "no history plot on the site"
