"""Control floors come from the reference set only (issue 51).

A review without judgment lines (the ``empty`` control) gets, on each reference, the floor: the lowest PMI there of
a review *with* lines.  That floor used to be taken over every review in the store, so importing a contaminated,
unranked candidate whose reviews score badly moved the published ``empty`` row (−14.2908 to −14.3395 in the issue).
Now it is taken over the human baseline and the controls only: importing any candidate leaves every control's score
unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.store import open_store
from tests.bench.conftest import TOPICS, tiny_papers
from tests.conftest import FAST_ENV


def _misleading(n: int) -> str:
    """A review of paper ``n``, in prose, whose judgment lines are about the other papers' subjects: it has lines,
    and they score below every reference-set review on this paper's references (many wrong lines, each against
    them)."""
    forms = ("The comparison with prior work on {t} is missing, so the reader cannot tell what is new.",
             "I could not follow how the method handles {t}; the section on it should be rewritten.",
             "The experiments never test {t}, although the introduction claims that they do.",
             "It is not clear why the authors ignore the standard baselines for {t} in their tables.")
    lines = [form.format(t=TOPICS[k]) for k in range(len(TOPICS)) if k != n for form in forms]
    return f"Summary:\nThe paper studies {TOPICS[(n + 1) % len(TOPICS)]}.\n\nWeaknesses:\n" + "\n".join(lines)


def _cli(data: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50"})


def _controls(data: Path) -> dict[tuple[str, str, str], float]:
    """(metric, preprocessor, control) -> its score on the published boards."""
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        return {(r["metric"], r["preprocessor"], r["candidate"]): r["score"] for r in store.rows(
            "SELECT b.metric, b.preprocessor, r.candidate, r.score FROM boards b JOIN board_rows r USING (board_id) "
            "WHERE b.scope = 'all' AND r.role = 'reference'")}
    finally:
        store.close()


def test_importing_a_candidate_leaves_every_control_score_unchanged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = open_store(data / "grebench.duckdb")
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    store.close()
    for args in (["bench"], ["score"]):
        assert _cli(data, *args).exit_code == 0
    before = _controls(data)
    assert any(name == "empty" for _, _, name in before)  # the control that gets the floor

    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text("".join(json.dumps({"paper_id": f"paper{n}", "review": _misleading(n)}) + "\n"
                               for n in range(4)))
    imported = _cli(data, "bench", "import", "--candidate", "offtopic", str(reviews))  # contaminated: unranked
    assert imported.exit_code == 0, imported.output
    assert _cli(data, "score").exit_code == 0

    assert _controls(data) == before
    # the worst an imported review can score: far below every reference-set review on one reference (the old rule
    # took that as the floor of every review without lines there)
    store = open_store(data / "grebench.duckdb")
    try:
        assert store.scalar("SELECT count(*) FROM scores WHERE candidate = 'offtopic' AND conditional <> marginal")
        store.con.execute("""UPDATE scores SET pmi = pmi - 50, conditional = conditional - 50
                             WHERE candidate = 'offtopic' AND paper_id = 'paper0' AND conditional <> marginal""")
    finally:
        store.close()
    assert _cli(data, "score").exit_code == 0  # the boards are computed again from the changed scores
    after = _controls(data)
    assert after == before
