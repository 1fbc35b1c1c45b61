"""Read-only queries for the site and the app: stored rows in, plain dicts out (the only module that queries).

Tables written by later stages (panel, validation, submissions) may be absent in an old store or an export;
every reader of such a table returns empty results instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, TypeVar, cast

from grebench.site._labels import Labels
from grebench.store import BASELINE, CONTESTANT, REFERENCE, Store

if TYPE_CHECKING:
    from grebench.submissions import LogGroup

SAMPLE_REVIEWS = 3
_Row = TypeVar("_Row", bound=Mapping[str, Any])


class VenueRow(TypedDict):
    """A venue-year with its paper count and when its reviews became public (:func:`venues`)."""

    venue_id: str
    venue: str | None
    venue_year: int | None
    papers: int
    reviews_public_from: datetime | None
    reviews_public_to: datetime | None


class CandidateRow(TypedDict):
    """A candidate as the pages show it (:func:`candidates`): its stored facts, page slug and role word."""

    name: str
    kind: str
    model: str | None
    family: str | None
    released: date | None
    cutoff: date | None
    description: str | None
    submitter: str | None
    slug: str
    role: str


class PaperLink(TypedDict):
    """A paper with its title and page slug (:func:`paper_ids`)."""

    paper_id: str
    title: str
    venue_id: str
    slug: str


class LinkedVersion(TypedDict):
    """Another version of a paper's work (another venue's paper), as its paper page lists it."""

    paper_id: str
    venue: str | None
    venue_id: str
    title: str
    reviews_public_at: datetime | None
    slug: str
    earlier: bool
    possible: NotRequired[str | None]  # an undecided possible link (issue 62): its reason; None for a link


class CompareSide(TypedDict):
    """One candidate of a compared pair: its name, page slug, board row facts and role."""

    name: str
    slug: str
    role: str
    score: float
    status: str


class ComparePaper(TypedDict):
    """A paper where the pair differs most: its id, title, page slug and the two scores with a - b."""

    paper_id: str
    title: str
    slug: str
    a: float
    b: float
    diff: float


class ComparePage(TypedDict):
    """A compare page (``compare/<a>--<b>.html``, :func:`compare_pages`): the two sides, the board's paired test of
    a - b, and the papers where they differ most."""

    slug: str
    a: CompareSide
    b: CompareSide
    papers: int
    diff: float
    ci95_low: float
    ci95_high: float
    p: float
    distinguishable: bool
    method: str
    a_higher: int
    b_higher: int
    top: list[ComparePaper]


#: At most this many contestants of the headline board get compare pages (every pair among them, each against the
#: human baseline and the floor controls): 30 contestants are 435 pairs among them plus 90 against the references.
MAX_COMPARED = 30


def compare_pairs(board: Mapping[str, Any], floors: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs of a board that get a compare page, each (upper, lower) in the board's order: every pair of its first
    :data:`MAX_COMPARED` contestants (controls are not contestants), each of them and the human baseline against each
    floor control on the board (``floors``: :func:`grebench.bench.floor_controls`), and each of them against the human
    baseline."""
    rows = list(board["rows"])
    order = {str(r["candidate"]): i for i, r in enumerate(rows)}
    contestants = [str(r["candidate"]) for r in rows if r.get("role") == CONTESTANT][:MAX_COMPARED]
    human = [str(r["candidate"]) for r in rows if r.get("role") == BASELINE]
    present = [f for f in floors if f in order]
    pairs = {(a, b) for i, a in enumerate(contestants) for b in contestants[i + 1:]}
    pairs |= {(a, b) for a in contestants for b in human}
    pairs |= {(a, b) for a in contestants + human for b in present}
    return sorted({(a, b) if order[a] < order[b] else (b, a) for a, b in pairs},
                  key=lambda pair: (order[pair[0]], order[pair[1]]))


def compare_slug(a: str, b: str) -> str:
    """The compare page's name (without ``.html``): both candidates' page slugs."""
    return f"{slug(a)}--{slug(b)}"


def compare_pages(store: Store, board: Mapping[str, Any], floors: Sequence[str]) -> list[ComparePage]:
    """Every compare page of a stored ``all``-scope board (:func:`compare_pairs`), from the per-paper values its rows
    are the means of (:func:`grebench.scoring.board_paper_scores`), tested as the board tests a row against the human
    baseline (:func:`grebench.scoring.compare_pair`, seeded with the board's seed)."""
    from grebench.scoring import board_paper_scores, compare_pair

    pairs = compare_pairs(board, floors)
    if not pairs:
        return []
    scores = board_paper_scores(store, board)
    titles = {p["paper_id"]: p["title"] for p in paper_ids(store)}
    rows = {str(r["candidate"]): r for r in board["rows"]}
    samples, seed = int(board.get("bootstrap_samples") or 2000), int(board.get("seed") or 0)

    def side(name: str) -> CompareSide:
        r = rows[name]
        return {"name": name, "slug": slug(name), "role": str(r.get("role")), "score": float(r["score"]),
                "status": str(r.get("status") or ("ranked" if r.get("rank") is not None else "reference"))}

    out: list[ComparePage] = []
    for a, b in pairs:
        c = compare_pair(a, b, scores, samples=samples, seed=seed)
        out.append({"slug": compare_slug(a, b), "a": side(a), "b": side(b), "papers": c["papers"], "diff": c["diff"],
                    "ci95_low": c["ci95_low"], "ci95_high": c["ci95_high"], "p": c["p"],
                    "distinguishable": c["distinguishable"], "method": c["method"], "a_higher": c["a_higher"],
                    "b_higher": c["b_higher"],
                    "top": [{"paper_id": t["paper_id"], "title": str(titles.get(t["paper_id"], t["paper_id"])),
                             "slug": slug(t["paper_id"]), "a": t["a"], "b": t["b"], "diff": t["diff"]}
                            for t in c["top"]]})
    return out


class BoardChange(TypedDict):
    """One ``board_changes`` row (:func:`changelog`)."""

    changed_at: datetime
    kind: str
    subject: str
    detail: str


class SnapshotListing(TypedDict):
    """A file under the snapshots folder (:func:`snapshot_files`): its path there, size and SHA-256.  Publishing adds
    its site-relative ``href`` (the app: its local ``path``); a snapshot's one-file archive also names its ``folder``
    and has ``archive`` True (:func:`grebench.site._archives.publish_archives`)."""

    name: str
    bytes: int
    sha256: str
    folder: NotRequired[str]
    archive: NotRequired[bool]
    href: NotRequired[str]
    path: NotRequired[str]


class SnapshotDownload(TypedDict):
    """One snapshot folder as the downloads page offers it (:func:`snapshot_manifests`)."""

    folder: str
    sha256: str
    href: str | None
    files: list[SnapshotListing]
    archive: SnapshotListing | None
    bytes: int
    command: str


def has_table(store: Store, name: str) -> bool:
    """Whether a table or view exists (exports and old stores may lack the later stages' tables)."""
    return bool(store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name])
                or store.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]))


def _rows(store: Store, table: str, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    return store.rows(sql, params) if has_table(store, table) else []


def _json(text: Any, default: Any) -> Any:
    if text in (None, ""):
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def slug(*parts: Any) -> str:
    """A file-name-safe, readable and unique name for a page (hash suffix keeps distinct inputs distinct)."""
    text = "-".join(str(p) for p in parts)
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()[:80] or "x"
    return f"{clean}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def venues(store: Store) -> list[VenueRow]:
    """Venue-years with paper counts and when their reviews became public."""
    rows = store.rows("""SELECT venue_id, any_value(venue) AS venue, any_value(venue_year) AS venue_year,
                                count(*) AS papers, min(reviews_public_at) AS reviews_public_from,
                                max(reviews_public_at) AS reviews_public_to
                         FROM papers GROUP BY venue_id ORDER BY venue_year DESC, venue_id""")
    return cast(list[VenueRow], rows)


def boards(store: Store, scope: str = "all") -> list[dict[str, Any]]:
    """The stored leaderboards (computed by the scoring stage), each with its rows and a page slug."""
    from grebench.scoring import stored_boards
    from grebench.submissions import variants_scored

    out = stored_boards(store, scope=scope)
    labels = Labels.load(store)
    shares = _attribution_summary(store) if out else {}
    variants = variants_scored(store) if out else {}
    for b in out:
        labels.annotate(b)
        b["slug"] = b["board_id"]
        for r in b["rows"]:
            r["candidate_slug"] = slug(r["candidate"])
            # a submitted model: how many variants its submitter had scored ("best of N"; issue 63)
            r["variants_scored"] = variants.get(r["candidate"])
            key = (b["venue_id"], b["metric"], b["estimator"], b["preprocessor"], r["candidate"])
            r["line_shares"] = shares.get(key)  # None: not attributed (the attribution setting)
    return out


def _attribution_summary(store: Store) -> dict[tuple[str, str, str, str, str], dict[str, Any]]:
    from grebench.scoring import attribution_summary

    ok = has_table(store, "line_attribution") and has_table(store, "papers")
    return attribution_summary(store) if ok else {}


def submissions_log(store: Store) -> list[LogGroup]:
    """The public submissions log grouped by submitter (:func:`grebench.submissions.submission_log`): the site's
    submissions page and the app's Submissions tab."""
    from grebench.submissions import grouped, submission_log

    return grouped(submission_log(store))


class ApprovalRow(TypedDict):
    """A submitted model on the submissions page's approvals section (:func:`submission_approvals`)."""

    candidate: str
    slug: str
    submission_id: str
    submission_status: str
    declared_cutoff: str
    vouched_cutoff: str | None
    state: str  # approved | approved over evidence | held | waiting for sealed evidence | not yet decided
    note: str | None  # approved over evidence: what was overridden and why; waiting: the papers scored and needed
    sealed_gap: str | None  # the sealed-gap test as it reads now (its describe()); None: nothing scored
    sealed_gap_p: float | None  # None: not testable
    information_shift: str | None
    information_shift_p: float | None
    hold: str | None  # a held model: the hold's audit text (the evidence, naming the papers that carry it)
    near_copies: int  # its reviews the near-paper copy check unsealed (they carry a nearby paper's public reviews)


def _override(detail: str) -> str:
    """``overriding: sealed-gap test; reason: ...``: the override in an approval's audit line (after
    :data:`grebench.submissions.OVERRIDE`)."""
    from grebench.submissions import OVERRIDE

    labels, _, rest = detail.partition(OVERRIDE)[2].removeprefix(":").partition(" (reason: ")
    reason = rest.partition("); evidence: ")[0].strip()
    return f"overriding: {labels.strip()}" + (f"; reason: {reason}" if reason else "")


def submission_approvals(store: Store) -> list[ApprovalRow]:
    """Every submitted model (a candidate of kind ``submitted`` with a submission; issue 62): its declared cutoff,
    whether the operator vouched for it (``grebench submissions approve``: ``approved``, ``approved over evidence``
    with what the override overrode and why), holds it (``held``: the hold's evidence), waits for the sealed-gap
    test to be testable, or has not decided; and the two submission-level tests approval runs, on the scores stored
    now (:func:`grebench.scoring.sealed_gap`, :func:`grebench.scoring.information_shift`, each with its one-sided p).
    Only what the public audit (``board_changes``) and the scores hold: never a key or an endpoint."""
    from grebench.scoring import GAP_MIN_PAPERS, information_shift, sealed_gap
    from grebench.submissions import OVERRIDE, held_submissions

    if not (has_table(store, "submissions") and has_table(store, "candidates")):
        return []
    rows = store.rows("""SELECT c.name, c.cutoff AS vouched, s.id, s.cutoff AS declared, s.status
                         FROM candidates c JOIN submissions s ON s.model_name = c.name WHERE c.kind = 'submitted'
                         QUALIFY row_number() OVER (PARTITION BY c.name ORDER BY s.created_at DESC, s.id) = 1
                         ORDER BY c.name""")
    if not rows:
        return []
    held = held_submissions(store) if has_table(store, "board_changes") else {}
    approvals = {r["subject"]: str(r["detail"] or "") for r in _rows(
        store, "board_changes", "SELECT subject, arg_max(detail, changed_at) AS detail FROM board_changes "
        "WHERE kind = 'submission' AND detail LIKE '%vouched for by the operator%' GROUP BY subject")}
    scored = has_table(store, "scores") and has_table(store, "generations")
    near = {r["candidate"]: int(r["n"]) for r in _rows(
        store, "generations", "SELECT candidate, count(*) AS n FROM generations WHERE json_extract(flags_json, "
        "'$.near_copy') IS NOT NULL GROUP BY candidate")}
    out: list[ApprovalRow] = []
    for r in rows:
        name = r["name"]
        gap = sealed_gap(store, name) if scored else None
        shift = information_shift(store, name) if scored else None
        note = None
        if r["vouched"] is not None:
            line = approvals.get(name, "")
            state = "approved over evidence" if OVERRIDE in line else "approved"
            note = _override(line) if OVERRIDE in line else None
        elif name in held:
            state = "held"
        elif gap is None or not gap.testable:
            state = "waiting for sealed evidence"
            sealed, public = (0, 0) if gap is None else (gap.sealed, gap.public)
            note = f"{sealed} sealed and {public} public papers scored, {GAP_MIN_PAPERS} of each needed"
        else:
            state = "not yet decided"
        out.append({"candidate": name, "slug": slug(name), "submission_id": r["id"],
                    "submission_status": r["status"], "declared_cutoff": str(r["declared"]),
                    "vouched_cutoff": None if r["vouched"] is None else str(r["vouched"]), "state": state,
                    "note": note, "sealed_gap": None if gap is None else gap.describe(),
                    "sealed_gap_p": gap.p if gap is not None and gap.testable else None,
                    "information_shift": None if shift is None else shift.describe(),
                    "information_shift_p": None if shift is None else shift.p,
                    "hold": held.get(name) if state == "held" else None, "near_copies": near.get(name, 0)})
    return out


def candidates(store: Store) -> list[CandidateRow]:
    """Every candidate, models first, then the baseline, then the controls (the api_key_env column is left out:
    it names a secret's place)."""
    rows = store.rows("""SELECT name, kind, model, family, released, cutoff, description, submitter
                         FROM candidates ORDER BY kind, name""")
    labels = Labels.load(store)
    for r in rows:
        r["slug"] = slug(r["name"])
        r["role"] = labels.role(r["kind"])
    # the models first, then the human baseline, then the controls (issue 63: one model listed after 16 controls)
    order = {CONTESTANT: 0, BASELINE: 1, REFERENCE: 2}
    rows.sort(key=lambda r: (order.get(r["role"], 0), str(r["kind"]), str(r["name"])))
    return cast(list[CandidateRow], rows)  # the query's columns, then slug and role


def judgment_lines(store: Store, texts: list[str], preprocessor: str) -> dict[str, list[str]]:
    """Judgment lines per review text (by sha256) for one preprocessor."""
    shas = sorted({hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts if t})
    if not shas:
        return {}
    rows = store.rows("""SELECT text_sha256, lines_json FROM judgments WHERE preprocessor = ? AND status = 'ok'
                         AND text_sha256 IN (SELECT unnest(?::VARCHAR[]))""", [preprocessor, shas])
    return {r["text_sha256"]: _json(r["lines_json"], []) for r in rows}


def lines_for(lines: dict[str, list[str]], text: str | None) -> list[str]:
    """Look up one text's judgment lines in the result of :func:`judgment_lines`."""
    return lines.get(hashlib.sha256((text or "").encode("utf-8")).hexdigest(), []) if text else []


def main_preprocessor(store: Store) -> str:
    """The preprocessor with the most scores (shown on model and paper pages)."""
    value = store.scalar("""SELECT preprocessor FROM scores WHERE preprocessor <> 'none'
                            GROUP BY preprocessor ORDER BY count(*) DESC LIMIT 1""")
    return str(value) if value else "rules"


def model_page(store: Store, name: str, board_tables: list[dict[str, Any]]) -> dict[str, Any]:
    """A candidate: its scores per board, contamination window, sample reviews with lines, panel results."""
    info: CandidateRow | dict[str, str | None] = next((c for c in candidates(store) if c["name"] == name),
                                                       {"name": name, "kind": None, "slug": slug(name)})
    scores = [{**{k: b[k] for k in ("venue_id", "venue", "metric", "estimator", "preprocessor", "slug")}, **r}
              for b in board_tables for r in b["rows"] if r["candidate"] == name]
    window = store.rows("""SELECT p.venue_id, count(*) AS papers, count(*) FILTER (WHERE cp.clean) AS clean,
                                  count(*) FILTER (WHERE cp.sealed) AS sealed,
                                  min(p.reviews_public_at) AS public_from, max(p.reviews_public_at) AS public_to
                           FROM clean_pairs cp JOIN papers p USING (paper_id)
                           WHERE cp.candidate = ? GROUP BY p.venue_id ORDER BY p.venue_id""", [name]) \
        if has_table(store, "clean_pairs") else []
    samples = store.rows("""SELECT g.generation_id, g.paper_id, p.title, g.text, g.generated_at, g.sealed,
                                   g.cost_usd, g.latency_s
                            FROM generations g JOIN papers p USING (paper_id)
                            WHERE g.candidate = ? AND g.status = 'ok' ORDER BY g.paper_id LIMIT ?""",
                         [name, SAMPLE_REVIEWS])
    lines = judgment_lines(store, [s["text"] for s in samples], main_preprocessor(store))
    for s in samples:
        s["lines"] = lines_for(lines, s["text"])
        s["paper_slug"] = slug(s["paper_id"])
    panel = _rows(store, "panel_rankings", """SELECT venue_id, strength, ci95_low, ci95_high, rank, rank_low,
                                                     rank_high FROM panel_rankings WHERE candidate = ?
                                              ORDER BY venue_id""", [name])
    verdicts = _rows(store, "panel_verdicts", """SELECT venue_id,
            count(*) FILTER (WHERE (candidate_a = ? AND outcome = 1) OR (candidate_b = ? AND outcome = -1)) AS wins,
            count(*) FILTER (WHERE outcome = 0) AS ties,
            count(*) FILTER (WHERE (candidate_a = ? AND outcome = -1) OR (candidate_b = ? AND outcome = 1)) AS losses,
            count(*) FILTER (WHERE flagged) AS flagged
        FROM panel_verdicts WHERE candidate_a = ? OR candidate_b = ? GROUP BY venue_id ORDER BY venue_id""",
                     [name] * 6)
    # the panel ranks every candidate it judged; a model contaminated on a venue's board is not ranked there either
    unranked = {s["venue_id"]: s["rank_word"] for s in scores if s.get("rank_word") in ("contaminated", "incomplete")}
    ranked = {s["venue_id"] for s in scores if s.get("rank") is not None}
    for p in panel:
        p["rank_word"] = unranked.get(p["venue_id"]) if p["venue_id"] not in ranked else None
    return {"candidate": info, "scores": scores, "window": window, "samples": samples, "panel": panel,
            "verdicts": verdicts}


def review_name(signature: str | None, review_id: str) -> str:
    """How a human review is named on every page and in the app: its reviewer's signature as OpenReview shows it
    (``…/Reviewer_iaCj`` → ``Reviewer_iaCj``), else its note id."""
    if signature and signature.strip():
        return signature.strip().rstrip("/").rsplit("/", 1)[-1]
    return review_id


def paper_ids(store: Store) -> list[PaperLink]:
    """Every paper with its title and page slug."""
    rows = store.rows("SELECT paper_id, title, venue_id FROM papers ORDER BY venue_id, paper_id")
    for r in rows:
        r["slug"] = slug(r["paper_id"])
    return cast(list[PaperLink], rows)  # the query's columns, then slug


def scored_paper(store: Store, venue_id: str | None) -> str | None:
    """A paper of the venue's sample (the first scored one, by id): where the app's Paper tab opens."""
    if not venue_id or not has_table(store, "scores"):
        return None
    value = store.scalar("""SELECT min(s.paper_id) FROM scores s JOIN papers p USING (paper_id)
                            WHERE p.venue_id = ?""", [venue_id])
    return None if value is None else str(value)


def paper_page(store: Store, paper_id: str) -> dict[str, Any]:
    """A paper: abstract, human reviews, candidate reviews with judgment lines, pair scores, votes, flags."""
    return paper_pages(store, [paper_id]).get(paper_id, {})


def _grouped(store: Store, table: str, sql: str, ids: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    """Rows of ``sql`` (which has a ``{where}`` slot on a ``paper_id`` column) grouped by paper, order kept."""
    where = "true" if ids is None else "{col} IN (SELECT unnest(?::VARCHAR[]))"
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in _rows(store, table, sql.replace("{where}", where).replace("{col}", _COLUMN[table]),
                     None if ids is None else [ids]):
        out[row.pop("_paper")].append(row)
    return out


_COLUMN = {"paper_versions": "v.paper_id",
           "papers": "paper_id", "reviews": "r.paper_id", "generations": "paper_id", "scores": "paper_id",
           "panel_votes": "paper_id", "paper_texts": "paper_id"}


def paper_pages(store: Store, paper_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """:func:`paper_page` for many papers (all when ``paper_ids`` is None) with one query per table."""
    papers = _grouped(store, "papers", "SELECT paper_id AS _paper, * FROM papers WHERE {where}", paper_ids)
    humans = _grouped(store, "reviews", """SELECT r.paper_id AS _paper, r.review_id, r.signature, v.rating,
                                                  v.confidence, v.text FROM reviews r
                           JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
                           WHERE {where} ORDER BY r.paper_id, r.kind DESC, r.review_id""", paper_ids)
    gens = _grouped(store, "generations", """SELECT paper_id AS _paper, generation_id, candidate, status, text, error,
                                                    sealed, cost_usd, latency_s, generated_at FROM generations
                                             WHERE {where} ORDER BY paper_id, candidate""", paper_ids)
    pair_scores = _grouped(store, "scores", """SELECT paper_id AS _paper, metric, estimator, preprocessor, candidate,
                                                      reference_review_id, pmi, conditional, marginal, n_tokens
                                               FROM scores WHERE {where}
                                               ORDER BY paper_id, metric, estimator, candidate, reference_review_id""",
                           paper_ids)
    votes = _grouped(store, "panel_votes", """SELECT paper_id AS _paper, judge, candidate_a, candidate_b, order_ab,
                                                     preference, confidence, reason FROM panel_votes WHERE {where}
                                              ORDER BY paper_id, candidate_a, candidate_b, judge, order_ab""",
                     paper_ids)
    versions = _grouped(store, "paper_versions", """
        SELECT v.paper_id AS _paper, q.paper_id, q.venue, q.venue_id, q.title, q.reviews_public_at
        FROM paper_versions v JOIN papers q ON q.paper_id = v.version_id
        WHERE {where} ORDER BY v.paper_id, q.reviews_public_at NULLS LAST, q.paper_id""", paper_ids)
    possible = _possible_links(store)
    texts = _grouped(store, "paper_texts", """SELECT paper_id AS _paper, status, hidden_json, flags_json
                                              FROM paper_texts WHERE {where}""", paper_ids)
    all_texts = [r["text"] for rs in humans.values() for r in rs] + [g["text"] or "" for gs in gens.values()
                                                                      for g in gs]
    lines = judgment_lines(store, all_texts, main_preprocessor(store))
    attribution = _attribution(store, paper_ids)
    names = {r["review_id"]: review_name(r["signature"], r["review_id"]) for rs in humans.values() for r in rs}
    out = {}
    for pid, (paper, *_) in papers.items():
        for r in humans.get(pid, []):
            r["name"] = names[r["review_id"]]
        for s in pair_scores.get(pid, []):  # a reference is named as its review is titled
            s["reference"] = names.get(s["reference_review_id"], s["reference_review_id"])
        for item in (*humans.get(pid, []), *gens.get(pid, [])):
            item["lines"] = lines_for(lines, item.get("text"))
        for g in gens.get(pid, []):
            g["candidate_slug"] = slug(g["candidate"])
            g["attribution"] = attribution.get(pid, {}).get(g["generation_id"], [])
            for block in g["attribution"]:
                for x in block["lines"]:
                    x["by_reference"] = {m: [(names.get(ref, ref), v) for ref, v in refs]
                                         for m, refs in x["by_reference"].items()}
        text = texts.get(pid)
        linked = versions.get(pid, [])
        for v in linked:
            v["slug"] = slug(v["paper_id"])
            v["earlier"] = earlier_version(v["reviews_public_at"], paper["reviews_public_at"])
            v["possible"] = possible.get((min(pid, v["paper_id"]), max(pid, v["paper_id"])))
        dates = [d for d in [paper["reviews_public_at"], *(v["reviews_public_at"] for v in linked)] if d]
        out[pid] = {"versions": linked, "public_since": min(dates, default=None),
                    "paper": paper, "humans": humans.get(pid, []), "generations": gens.get(pid, []),
                    "pair_scores": pair_scores.get(pid, []), "votes": votes.get(pid, []),
                    "hidden": _json(text[0]["hidden_json"], []) if text else [],
                    "flags": _json(text[0]["flags_json"], []) if text else []}
    return out


def _possible_links(store: Store) -> dict[tuple[str, str], str]:
    """(paper, other) → the reason of each undecided possible link (issue 62), smaller id first."""
    if not has_table(store, "paper_link_flags"):
        return {}
    return {(r["paper_id"], r["linked_id"]): r["reason"] for r in store.rows(
        "SELECT paper_id, linked_id, reason FROM paper_link_flags WHERE decision IS NULL")}


def _attribution(store: Store, paper_ids: list[str] | None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per paper and generation, the stored per-line contributions (:func:`grebench.scoring.paper_attribution`),
    each block shaded by its headline metric: ``shade`` names it, each line gets its ``class`` and a ``level`` 1-4
    (|value| over the block's largest |value|, in quarters): the shading the page draws."""
    if not has_table(store, "line_attribution"):
        return {}
    from grebench.scoring import headline_metric, line_class, paper_attribution

    out = paper_attribution(store, paper_ids)
    for gens in out.values():
        for blocks in gens.values():
            for block in blocks:
                shade = headline_metric() if headline_metric() in block["metrics"] else block["metrics"][0]
                top = max((abs(x["values"].get(shade, 0.0)) for x in block["lines"]), default=0.0) or 1.0
                block["shade"] = shade
                for x in block["lines"]:
                    value = x["values"].get(shade)
                    x["class"] = "missing" if value is None else line_class(value)
                    x["level"] = 0 if value is None else min(4, max(1, math.ceil(4 * abs(value) / top)))
    return out


def earlier_version(version_public_at: Any, paper_public_at: Any) -> bool:
    """Whether a linked version's reviews were public before this paper's (or this paper's are not public)."""
    return version_public_at is not None and (paper_public_at is None or version_public_at < paper_public_at)


def version_line(version: LinkedVersion) -> str:
    """One linked version as the paper page and the app say it: ``earlier version: VENUE TITLE (reviews public
    since DATE)``."""
    when = version["reviews_public_at"]
    since = f"reviews public since {str(when)[:10]}" if when else "reviews not public"
    possible = version.get("possible")
    line = (f"{'possible ' if possible else ''}{'earlier' if version['earlier'] else 'other'} version: "
            f"{version['venue'] or version['venue_id']} {version['title']} ({since})")
    return line + (f"; undecided, so this paper's reviews are not counted as sealed: {possible}" if possible else "")


def methodology(store: Store) -> dict[str, Any]:
    """The latest validation report per (estimator, preprocessor) and the judge exam table."""
    reports = _rows(store, "validation_reports", """SELECT run_id, estimator, preprocessor, rows_json, created_at
                                                    FROM validation_reports ORDER BY created_at DESC""")
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in reports:
        latest.setdefault((r["estimator"], r["preprocessor"]), {**r, "rows": _json(r["rows_json"], [])})
    exams = _rows(store, "judge_exams", """SELECT venue_id, judge, p_c, p_p, p_s, passed, weight, failed_json
                                           FROM judge_exams ORDER BY venue_id, passed DESC, weight DESC""")
    for e in exams:
        e["failed"] = _json(e["failed_json"], [])
    agreement = _rows(store, "panel_agreement", """SELECT venue_id, gem_metric, kendall_tau, pair_agreement, n_pairs
                                                   FROM panel_agreement ORDER BY venue_id, gem_metric""")
    setups = store.rows("SELECT DISTINCT estimator, preprocessor FROM scores ORDER BY estimator, preprocessor")
    return {"reports": list(latest.values()), "exams": exams, "agreement": agreement, "setups": setups,
            "padding": published_padding()}


def published_padding() -> dict[str, Any]:
    """The measured before/after of the target rule on the bundled samples (issue 35), as shipped with the package
    (``grebench/scoring/data/padding_validation.json``, written from ``benchmarks/target_rule.py``'s output)."""
    from importlib import resources

    text = resources.files("grebench.scoring").joinpath("data/padding_validation.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def changelog(store: Store, limit: int = 200) -> list[BoardChange]:
    """Board changes, newest first."""
    return cast(list[BoardChange], _rows(store, "board_changes", "SELECT changed_at, kind, subject, detail FROM "
                                         "board_changes ORDER BY changed_at DESC LIMIT ?", [limit]))


def snapshot_files(root: Path) -> list[SnapshotListing]:
    """Files under the snapshots folder (``settings.snapshots_path``) with size and SHA-256 (empty when no snapshot
    was cut yet)."""
    out: list[SnapshotListing] = []
    if root.is_dir():
        # a snapshot being cut is written under a hidden ``.NAME.tmp-…`` folder: not published until renamed
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                           and not any(part.startswith(".") for part in p.relative_to(root).parts)):
            digest = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(cast("Callable[[], bytes]", lambda fh=fh: fh.read(1 << 20)), b""):
                    digest.update(block)
            out.append({"name": path.relative_to(root).as_posix(), "bytes": path.stat().st_size,
                        "sha256": digest.hexdigest()})
    return out


def snapshot_manifests(files: list[SnapshotListing]) -> list[SnapshotDownload]:
    """One entry per snapshot folder (a ``DIR/manifest.json`` in :func:`snapshot_files`' listing): its folder name,
    the manifest's SHA-256, its files, its one-file ``archive`` (an entry of the listing with ``archive: True``, or
    None), total bytes and the exact import command (the folder is the one a visitor downloads or unpacks the files
    into)."""
    out: list[SnapshotDownload] = []
    archives = {f["folder"]: f for f in files if f.get("archive")}
    for m in files:
        parts = m["name"].split("/")
        if len(parts) == 2 and parts[1] == "manifest.json":
            folder = parts[0]
            members = [f for f in files if f["name"].startswith(folder + "/")]
            out.append({"folder": folder, "sha256": m["sha256"], "href": m.get("href"), "files": members,
                        "archive": archives.get(folder),
                        "bytes": sum(int(f["bytes"]) for f in members),
                        "command": f"grebench snapshot import --manifest-sha256 {m['sha256']} {folder}"})
    return out


def group_by(rows: list[_Row], key: str) -> dict[Any, list[_Row]]:
    """Rows grouped by one field, in first-seen order."""
    out: dict[Any, list[_Row]] = defaultdict(list)
    for r in rows:
        out[r[key]].append(r)
    return dict(out)
