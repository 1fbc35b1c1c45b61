"""Per-line attribution: what each judgment line of a scored review adds to its GEM / GEM-S score.

A score is log P(y | x, s) − log P(y | s), summed over the tokens of the *reference* y; the candidate x is only
conditioned on.  So the per-token log-probabilities the estimator computes split the score over the reference's
lines, never over the candidate's, and a candidate line's contribution is measured by leaving it out:

    contribution(line i) = log P(y | x, s) − log P(y | x without line i, s)

one extra conditional request per candidate line, per reference, per metric (the marginal does not depend on the
candidate).  Averaged over a paper's references it is exactly the change of the candidate's paper score when the
line is dropped, since the paper score is the mean over references.  Contributions need not sum to the score: two
lines that say the same thing each add little alone.  Rows are stored per score key in ``line_attribution``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from grebench.scoring._request import LogprobRequest
from grebench.store import Store, utcnow

#: The settings' choices: ``auto`` attributes with fast proxies only (an LM pays one request per line, see
#: docs/scoring.md), ``off`` never, ``leave-one-out`` with every estimator.
ATTRIBUTION_CHOICES = ("auto", "off", "leave-one-out")
METHOD = "leave-one-out"
#: |contribution| at or below this many nats counts as "none": above a low-precision model's drift (0.05 nats,
#: docs/estimators.md), so a line counted as carrying information (or less than none) is not rounding noise.
ATTRIBUTION_THRESHOLD = 0.1


def attributes(setting: str, proxy: bool) -> bool:
    """Whether the score stage attributes scores of an estimator (``proxy``: a fast stand-in) under ``setting``."""
    if setting not in ATTRIBUTION_CHOICES:
        raise ValueError(f"attribution must be one of {', '.join(ATTRIBUTION_CHOICES)}, got {setting!r}")
    return setting == METHOD or (setting == "auto" and proxy)


def without_line(lines: Sequence[str], index: int) -> str | None:
    """The judgment-line text with line ``index`` left out (None when nothing is left: the marginal's "not
    available")."""
    rest = [line for i, line in enumerate(lines) if i != index]
    return "\n".join(rest) or None


def leave_one_out(conditional: LogprobRequest, lines: Sequence[str]) -> list[LogprobRequest]:
    """The requests of one scored pair with each candidate line left out in turn (same synopsis and target)."""
    return [LogprobRequest(conditional.paper_id, conditional.synopsis, without_line(lines, i), conditional.target,
                           conditional.prompt_version) for i in range(len(lines))]


@dataclass(frozen=True)
class ScoreKey:
    """The key of one ``scores`` row and the generation it scored."""

    metric: str
    estimator: str
    preprocessor: str
    candidate: str
    paper_id: str
    reference: str
    generation_id: str


def attributed(store: Store, metric: str, estimator: str, preprocessor: str) -> set[tuple[str, str, str, str]]:
    """(candidate, paper, reference, generation) already attributed for one metric and setup."""
    return {(r["candidate"], r["paper_id"], r["reference_review_id"], r["generation_id"]) for r in store.rows(
        """SELECT DISTINCT candidate, paper_id, reference_review_id, generation_id FROM line_attribution
           WHERE metric = ? AND estimator = ? AND preprocessor = ?""", [metric, estimator, preprocessor])}


def write_attribution(store: Store, rows: Sequence[tuple[ScoreKey, Sequence[str], Sequence[float]]]) -> int:
    """Store each key's lines and contributions (replacing what the key had); returns the rows written."""
    if not rows:
        return 0
    keys = [(k.metric, k.estimator, k.preprocessor, k.candidate, k.paper_id, k.reference) for k, _, _ in rows]
    store.con.execute(  # a key scored again (a new generation) keeps no line of the old review
        """DELETE FROM line_attribution a USING (SELECT unnest(?::VARCHAR[]) AS m, unnest(?::VARCHAR[]) AS e,
               unnest(?::VARCHAR[]) AS p, unnest(?::VARCHAR[]) AS c, unnest(?::VARCHAR[]) AS pid,
               unnest(?::VARCHAR[]) AS r) k
           WHERE a.metric = k.m AND a.estimator = k.e AND a.preprocessor = k.p AND a.candidate = k.c
             AND a.paper_id = k.pid AND a.reference_review_id = k.r""", [list(col) for col in zip(*keys, strict=True)])
    cols: dict[str, list[Any]] = defaultdict(list)
    for key, lines, values in rows:
        for i, (line, value) in enumerate(zip(lines, values, strict=True)):
            for name, v in (("metric", key.metric), ("estimator", key.estimator), ("preprocessor", key.preprocessor),
                            ("candidate", key.candidate), ("paper_id", key.paper_id), ("reference", key.reference),
                            ("generation_id", key.generation_id), ("line_no", i), ("line", line),
                            ("contribution", float(value))):
                cols[name].append(v)
    if cols:
        store.con.execute(
            """INSERT INTO line_attribution SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),
               unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),
               unnest(?::INTEGER[]), unnest(?::VARCHAR[]), unnest(?::DOUBLE[]), ?, ?""",
            [cols["metric"], cols["estimator"], cols["preprocessor"], cols["candidate"], cols["paper_id"],
             cols["reference"], cols["generation_id"], cols["line_no"], cols["line"], cols["contribution"],
             METHOD, utcnow()])
    return len(cols["line"])


def line_class(value: float) -> str:
    """``carries`` (> :data:`ATTRIBUTION_THRESHOLD`), ``none`` (within ± it) or ``less`` (below −it)."""
    return "carries" if value > ATTRIBUTION_THRESHOLD else "less" if value < -ATTRIBUTION_THRESHOLD else "none"


def paper_attribution(store: Store, paper_ids: Collection[str] | None = None
                      ) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per paper, per generation id: one block per (estimator, preprocessor) that attributed it, each with its
    ``metrics`` and the generation's ``lines`` in order; a line has its contribution per metric averaged over the
    references (``values``: the change of the paper score when the line is left out) and per reference
    (``by_reference``: metric -> [(reference, value)])."""
    where = "" if paper_ids is None else "WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))"
    rows = store.rows(f"""SELECT paper_id, generation_id, estimator, preprocessor, metric, line_no,
                                 any_value(line) AS line, avg(contribution) AS mean,
                                 list(struct_pack(ref := reference_review_id, value := contribution)
                                      ORDER BY reference_review_id) AS refs
                          FROM line_attribution {where} GROUP BY ALL
                          ORDER BY paper_id, generation_id, estimator, preprocessor, line_no, metric""",
                      [] if paper_ids is None else [list(paper_ids)])
    blocks: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for r in rows:
        block = blocks.setdefault((r["paper_id"], r["generation_id"], r["estimator"], r["preprocessor"]), {
            "estimator": r["estimator"], "preprocessor": r["preprocessor"], "metrics": [], "lines": {}})
        if r["metric"] not in block["metrics"]:
            block["metrics"].append(r["metric"])
        line = block["lines"].setdefault(r["line_no"], {"line_no": r["line_no"], "line": r["line"], "values": {},
                                                        "by_reference": {}})
        line["values"][r["metric"]] = r["mean"]
        line["by_reference"][r["metric"]] = [(x["ref"], x["value"]) for x in r["refs"]]
    out: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for (pid, gid, _, _), block in blocks.items():
        block["lines"] = [block["lines"][k] for k in sorted(block["lines"])]
        out[pid][gid].append(block)
    return {pid: dict(gens) for pid, gens in out.items()}


def attribution_summary(store: Store) -> dict[tuple[str, str, str, str, str], dict[str, Any]]:
    """Per (venue id, metric, estimator, preprocessor, candidate): how many attributed lines (each averaged over
    its references) carry information (> :data:`ATTRIBUTION_THRESHOLD`), none or less than none, as counts and
    shares."""
    rows = store.rows(f"""WITH per_line AS (SELECT a.metric, a.estimator, a.preprocessor, a.candidate, p.venue_id,
                                                   a.paper_id, a.line_no, avg(a.contribution) AS v
                                            FROM line_attribution a JOIN papers p USING (paper_id) GROUP BY ALL)
                          SELECT venue_id, metric, estimator, preprocessor, candidate, count(*) AS lines,
                                 count(*) FILTER (WHERE v > {ATTRIBUTION_THRESHOLD!r}) AS carries,
                                 count(*) FILTER (WHERE v < {-ATTRIBUTION_THRESHOLD!r}) AS less
                          FROM per_line GROUP BY ALL""")
    out: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for r in rows:
        n, carries, less = int(r["lines"]), int(r["carries"]), int(r["less"])
        out[(r["venue_id"], r["metric"], r["estimator"], r["preprocessor"], r["candidate"])] = {
            "lines": n, "carries": carries, "none": n - carries - less, "less": less,
            "carries_share": carries / n, "none_share": (n - carries - less) / n, "less_share": less / n}
    return out
