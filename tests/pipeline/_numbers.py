"""The numbers a run published, read from its store in a form that does not depend on how the code is arranged:
boards, validation, the judge panel's exam, ranking and agreement, and the paper sample (issue 32: a refactor must
leave every number the default run prints unchanged)."""

from __future__ import annotations

import json
from typing import Any

from grebench.store import Store

_QUERIES = {
    "sample": "SELECT venue_id, paper_id FROM paper_samples ORDER BY ALL",
    "boards": """SELECT b.venue_id, b.metric, b.scope, b.estimator, b.preprocessor, b.papers, r.candidate, r.rank,
                        r.rank_low, r.rank_high, r.score, r.ci95_low, r.ci95_high, r.pairs, r.p_vs_human
                 FROM board_rows r JOIN boards b USING (board_id) ORDER BY ALL""",
    "scores": """SELECT metric, estimator, preprocessor, count(*) AS n, round(sum(pmi), 6) AS pmi
                 FROM scores GROUP BY ALL ORDER BY ALL""",
    "validation": "SELECT estimator, preprocessor, rows_json FROM validation_reports ORDER BY ALL",
    "exam": """SELECT venue_id, judge, p_c, p_p, p_s, passed, weight FROM judge_exams ORDER BY ALL""",
    "panel": """SELECT venue_id, candidate, strength, rank, ci95_low, ci95_high FROM panel_rankings ORDER BY ALL""",
    "agreement": """SELECT venue_id, gem_metric, kendall_tau, pair_agreement, n_pairs, disagreements_json
                    FROM panel_agreement ORDER BY ALL""",
}


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 7)
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def published_numbers(store: Store) -> dict[str, Any]:
    """Every published number of the store, rounded to 7 digits (JSON-comparable)."""
    out: dict[str, Any] = {}
    for name, sql in _QUERIES.items():
        cur = store.con.execute(sql)
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
        for row in rows:
            if "rows_json" in row:
                row["rows_json"] = json.loads(row["rows_json"])
        out[name] = _round(json.loads(json.dumps(rows, default=str)))
    return out
