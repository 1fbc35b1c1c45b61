"""The copy check of a submitted candidate, one function for evaluation and approval.

Evaluation refuses a candidate whose reviews copy their papers' public reviews; approval (vouching for a declared
cutoff) runs the same check again on what is stored *then*: every ``ok`` review of the candidate, including any added
after its evaluation, against the public reviews the store holds then (reviews that became public since, linked
earlier versions of the paper, a stronger detector).  The flag itself is the bench's copy detector
(:func:`grebench.bench.copy_findings`: a score at or above :data:`grebench.bench.COPY_THRESHOLD`), so replacing the
detector changes both callers at once.  The evidence names, for each flagged review, the paper, the share and the public
review it carries most of (:func:`_closest_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grebench.settings import Settings
from grebench.store import Store

if TYPE_CHECKING:
    from grebench.scoring import EstimatorHandle, LMCopyEvidence


@dataclass(frozen=True)
class CopiedReview:
    """One flagged review: its paper, the detector's share, and the public review it carries most of."""

    paper_id: str
    share: float
    reference: str | None  # review id (with its paper when that is another one: a linked earlier version)
    detail: str = ""  # the detector's own account (:meth:`grebench.bench.CopyEvidence.describe`)

    def text(self) -> str:
        """``paper (share, closest public review ...: what the detector found)``."""
        ref = f", closest public review {self.reference}" if self.reference else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.paper_id} ({self.share:.0%}{ref}{detail})"


@dataclass(frozen=True)
class CopyCheck:
    """The outcome of :func:`check_copies` on one candidate: the reviews that copy, and those that do not read as
    text (the prose test: words with their order taken away carry a copy past any reading of word order)."""

    candidate: str
    checked: int
    copies: tuple[CopiedReview, ...]
    not_prose: tuple[CopiedReview, ...] = ()
    #: Reviews the LM copy check flags (``settings.submissions.lm_copy_estimator``): the information they carry
    #: about the public reviews, whatever their wording (:class:`grebench.scoring.LMCopyCheck`).
    lm_copies: tuple[CopiedReview, ...] = ()
    lm_estimator: str = ""
    #: Reviews the near-paper copy check flags (``settings.submissions.near_copy_estimator``): they carry the public
    #: reviews of another, nearby paper (:mod:`grebench.submissions._nearcopy`).  Not a refusal: such a review counts
    #: as written with public reviews in view (:func:`grebench.submissions.unseal_near_copies`).
    near_copies: tuple[CopiedReview, ...] = ()
    near_estimator: str = ""

    @property
    def flagged(self) -> bool:
        """Whether some review copies its paper's public reviews (in words or in information) or does not read as
        text: what refuses a candidate.  Reviews carrying a nearby paper's reviews (``near_copies``) are unsealed
        instead (:func:`grebench.submissions.unseal_near_copies`)."""
        return bool(self.copies or self.not_prose or self.lm_copies)

    def evidence(self, limit: int = 5) -> str:
        """The first ``limit`` flagged reviews, as text."""
        shown = ", ".join(c.text() for c in self.copies[:limit])
        return shown + (f", and {len(self.copies) - limit} more" if len(self.copies) > limit else "")

    def summary(self) -> str:
        """``N of M reviews copy their paper's public reviews (...)``, ``K of M reviews do not read as text
        (...)``: what a refusal says."""
        from grebench.bench import COPY_THRESHOLD

        found = []
        if self.copies:
            found.append(f"{len(self.copies)} of {self.checked} reviews copy their paper's public reviews (copy "
                         f"detector score at or above {COPY_THRESHOLD:.0%}: {self.evidence()})")
        if self.lm_copies:
            found.append(f"{len(self.lm_copies)} of {self.checked} reviews carry their paper's public reviews' "
                         f"information far beyond honest reviews (LM copy check under {self.lm_estimator}: "
                         f"{_first_three(self.lm_copies, ', ', True)})")
        if self.not_prose:
            found.append(f"{len(self.not_prose)} of {self.checked} reviews do not read as text "
                         f"({_first_three(self.not_prose, ', ', True)})")
        return "; ".join(found)

    def near_summary(self) -> str:
        """``K of M reviews carry the public reviews of another, nearby paper ...``: the near-paper check's
        findings (empty when none)."""
        if not self.near_copies:
            return ""
        return (f"{len(self.near_copies)} of {self.checked} reviews carry the public reviews of another, nearby paper "
                f"beyond what honest reviews of other papers do (near-paper copy check under {self.near_estimator}: "
                f"{_first_three(self.near_copies, '; ', False)})")


def _first_three(reviews: tuple[CopiedReview, ...], sep: str, brackets: bool) -> str:
    """``P1 (detail), P2 (detail), P3 (detail), and N more``: the first three flagged reviews of a summary line."""
    shown = sep.join(f"{c.paper_id} ({c.detail})" if brackets else f"{c.paper_id} {c.detail}" for c in reviews[:3])
    return shown + (f"{sep}and {len(reviews) - 3} more" if len(reviews) > 3 else "")


def _closest_reference(store: Store, paper_id: str, text: str) -> str | None:
    """The public review (id, and its paper when another: a linked version) that ``text`` carries most of.

    Attribution only, for the operator: the flag is the detector's.  Looked up among the texts the detector compares
    against (:func:`grebench.bench.copied_shares` reads them through ``public_review_texts``), so a linked earlier
    version's review is named too."""
    from grebench.bench import copy_share, paper_own_texts, public_review_texts

    refs = public_review_texts(store, [paper_id]).get(paper_id) or []
    if not refs:
        return None
    own = paper_own_texts(store, [paper_id]).get(paper_id, "")
    words = set(text.split())

    def closeness(ref: str) -> tuple[float, float]:  # the detector's score; ties (near-identical reviews): shared words
        other = set(ref.split())
        return copy_share(text, [ref], own), len(words & other) / max(1, len(words | other))

    best = max(refs, key=closeness)
    found = store.rows("SELECT r.review_id, r.paper_id FROM review_versions v JOIN reviews r USING (review_id) "
                       "WHERE v.text = ? ORDER BY r.paper_id <> ?, r.review_id LIMIT 1", [best, paper_id])
    if not found:
        return None
    row = found[0]
    return row["review_id"] if row["paper_id"] == paper_id else f"{row['review_id']} (of paper {row['paper_id']})"


def check_copies(store: Store, candidate: str, settings: Settings | None = None, *,
                 near_only: bool = False) -> CopyCheck:
    """The copy detector and the prose test on every review the store holds for ``candidate`` (any status: a review
    refused before is checked again), with the evidence of each flag.

    With ``settings.submissions.lm_copy_estimator`` set, the LM copy check too (:func:`lm_copy_findings`: the
    information a review carries about the public reviews, beyond honest reviews', whatever its wording).

    Writes nothing: evaluation (:func:`grebench.submissions.refuse_copied_generations`) and approval
    (:func:`grebench.submissions.approve_submission`) decide what a flag does.  The prose test reads the word model
    of human reviews, or the evaluation LM named by ``settings.submissions.prose_estimator``
    (:func:`lm_prose_findings`).

    With ``settings.submissions.near_copy_estimator`` set (the default), the near-paper copy check too
    (:mod:`grebench.submissions._nearcopy`: reviews carrying a nearby paper's public reviews, which are unsealed
    rather than refused).  ``near_only``: that check alone (an import, whose word-level checks ran as it was read)."""
    from grebench.bench import copy_findings, prose_findings

    rows = store.rows("SELECT paper_id, text FROM generations WHERE candidate = ? AND text IS NOT NULL AND "
                      "trim(text) <> '' ORDER BY paper_id, generation_id", [candidate])
    copies: tuple[CopiedReview, ...] = ()
    not_prose: tuple[CopiedReview, ...] = ()
    lm_copies: tuple[CopiedReview, ...] = ()
    spec = ""
    if not near_only:  # an import's word-level checks ran as it was read
        findings = copy_findings(store, [(r["paper_id"], r["text"] or "") for r in rows])
        copies = tuple(CopiedReview(r["paper_id"], found.score,
                                    _closest_reference(store, r["paper_id"], r["text"] or ""), found.describe())
                       for r, found in zip(rows, findings, strict=True) if found.copied)
        texts = [r["text"] or "" for r in rows]
        if settings is not None and settings.submissions.prose_estimator:
            reads = lm_prose_findings(store, settings, texts)
        else:
            reads = prose_findings(texts)
        not_prose = tuple(CopiedReview(r["paper_id"], found.gain, None, found.describe())
                          for r, found in zip(rows, reads, strict=True) if not found.prose)
        spec = settings.submissions.lm_copy_estimator if settings is not None else ""
        if settings is not None and spec and rows:
            from grebench.scoring import EstimatorHandle

            handle = EstimatorHandle(spec, settings)
            try:
                evidence = lm_copy_findings(store, handle, [(r["paper_id"], r["text"] or "") for r in rows])
            finally:  # the LM built for the check (its servers, a model in this process) is released here
                handle.close()
            lm_copies = tuple(CopiedReview(r["paper_id"], e.statistic, e.reference, e.describe())
                              for r, e in zip(rows, evidence, strict=True) if e is not None and e.copied)
    check = CopyCheck(candidate, len(rows), copies, not_prose, lm_copies, spec)
    if settings is None or not settings.submissions.near_copy_estimator or not rows:
        return check
    from grebench.scoring import EstimatorHandle
    from grebench.submissions._nearcopy import with_near_copies

    links = settings.ingest.link_estimator  # the near papers ranked by the linking LM's view of the abstracts
    return with_near_copies(store, check, EstimatorHandle(settings.submissions.near_copy_estimator, settings),
                            EstimatorHandle(links, settings) if links else None)


#: Papers of the store (with two public reviews or more) whose honest reviews calibrate the LM copy check's bar,
#: besides the checked papers themselves: about 1,000 honest reviews, enough to place a 99.5 % quantile.
LM_COPY_SAMPLE = 300


def lm_copy_findings(store: Store, handle: EstimatorHandle, items: list[tuple[str, str]]
                     ) -> list[LMCopyEvidence | None]:
    """The LM copy check (:class:`grebench.scoring.LMCopyCheck`) of each (paper id, review text) with the evaluation
    LM of ``handle`` (an :class:`grebench.scoring.EstimatorHandle` the caller builds and closes: the one of
    ``settings.submissions.lm_copy_estimator``): calibrated on the honest (public) reviews of the checked
    papers and of :data:`LM_COPY_SAMPLE` more of the store's papers (the latest version of each), each against the
    other public reviews of its paper.  Linked earlier versions of a paper are the word-level check's (not here).
    None for a review whose paper has fewer than two public reviews (no honest pair to compare with).  Every request
    goes through the store's log-prob cache (:class:`grebench.scoring.CachedLogprobs`), written as it is computed."""
    from grebench.scoring import CachedLogprobs, LMCopyCheck, PaperReviews, rules_judgment_lines

    checked = sorted({pid for pid, _ in items})
    sample = [r["paper_id"] for r in store.rows(
        "SELECT paper_id FROM reviews GROUP BY paper_id HAVING count(*) >= 2 ORDER BY hash(paper_id) LIMIT ?",
        [LM_COPY_SAMPLE])]
    pids = sorted(set(checked) | set(sample))
    texts: dict[str, dict[str, str]] = {}
    for r in store.rows("SELECT r.paper_id, r.review_id, arg_max(v.text, v.version) AS text FROM reviews r "
                        "JOIN review_versions v USING (review_id) WHERE r.paper_id IN (SELECT unnest(?::VARCHAR[])) "
                        "AND v.text IS NOT NULL GROUP BY ALL ORDER BY r.review_id", [pids]):
        texts.setdefault(r["paper_id"], {})[r["review_id"]] = r["text"]  # the latest version: one honest reviewer
    abstracts = {r["paper_id"]: r["abstract"] for r in store.rows(
        "SELECT paper_id, abstract FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))", [pids])}
    papers = {pid: PaperReviews(pid, abstracts.get(pid), {rid: rules_judgment_lines(t)
                                                          for rid, t in texts.get(pid, {}).items()})
              for pid in pids}
    papers = {pid: p for pid, p in papers.items() if sum(1 for lines in p.reviews.values() if lines) >= 2}
    corpus = ({pid: ["\n".join(lines) for lines in p.reviews.values() if lines] for pid, p in papers.items()}
              if handle.info.needs_corpus else None)
    estimator = handle.get(corpus)
    # every request through the store's log-prob cache: a second evaluation or an approval over the same store
    # computes only the requests of reviews (candidate or public) it has not seen
    check = LMCopyCheck(estimator, papers, logprobs=CachedLogprobs(store, estimator, "LM copy check"))
    check.calibrate()
    todo = [(pid, rules_judgment_lines(text)) for pid, text in items if pid in papers]
    found = iter(check.check(todo)) if todo else iter(())
    return [next(found) if pid in papers else None for pid, _ in items]


#: Human reviews of the store read by the evaluation LM to place the prose test's bar (the lowest per-token
#: log-likelihood among them, less :data:`LM_PROSE_MARGIN`).
LM_PROSE_SAMPLE = 200
LM_PROSE_MARGIN = 0.5


def lm_prose_findings(store: Store, settings: Settings, texts: list[str]) -> list[Any]:
    """The prose test with the evaluation LM: each text's unconditional log-likelihood per token (the GEM prompt
    with neither abstract nor first review) against the lowest of :data:`LM_PROSE_SAMPLE` of the store's human
    reviews under the same LM, less :data:`LM_PROSE_MARGIN` nats; a text shorter than the word test's minimum is not
    judged.  The calls go through the log-prob cache like every score."""
    from grebench.bench import PROSE_MIN_TOKENS as MIN_TOKENS
    from grebench.bench import ProseEvidence
    from grebench.scoring import EstimatorHandle, unconditional_logprobs

    human = [r["text"] for r in store.rows(
        "SELECT v.text FROM review_versions v WHERE v.text IS NOT NULL ORDER BY hash(v.review_id), v.version "
        "LIMIT ?", [LM_PROSE_SAMPLE])]
    handle = EstimatorHandle(settings.submissions.prose_estimator, settings)
    try:
        measured = unconditional_logprobs(store, handle, [*human, *texts])
    finally:  # the LM built for the prose test (its servers, a model in this process) is released here
        handle.close()
    per_token = [lp / n if n else 0.0 for lp, n in measured]
    bar = (min(per_token[:len(human)]) if human else float("-inf")) - LM_PROSE_MARGIN
    out: list[Any] = []
    for (_, n), value in zip(measured[len(human):], per_token[len(human):], strict=True):
        words = len(_words(texts[len(out)]))
        out.append(ProseEvidence(round(value, 4), n if words >= MIN_TOKENS else 0, round(bar, 4),
                                 f"log-likelihood per token under {settings.submissions.prose_estimator}"))
    return out


def _words(text: str) -> list[str]:
    return text.split()
