"""Possible links by the evaluation LM's view of the abstracts, with a bar calibrated on distinct papers of one venue
(issue 62 §3, second bullet).

A resubmission whose title and abstract are rewritten (synonyms, sentences reordered and dropped: cosine 0.14-0.41
to the earlier version) keeps what the work is about, and that is what a language model reads.  The LM view of a
pair is handed in by a higher layer (:class:`AbstractReader`; the scoring layer's
:class:`grebench.scoring.LMAbstractReader` reads it with any estimator): the information each abstract gives about
the other, as a share of what the other costs alone, the mean of both directions.

Nothing here says how high that must be: the bar is what **distinct** papers reach.  For each venue of the pairs to
read, the pairs of its own papers that the rare-word index proposes as candidates of each other (the hardest distinct
pairs: one venue does not hold two versions of a work; pairs already linked or flagged are left out), at most
:data:`MAX_CALIBRATION_PAIRS` of them, are read the same way; the venue's bar is the conformal
``1 - FALSE_FLAG_RATE`` quantile of their statistic (the largest one below ``1 / FALSE_FLAG_RATE`` pairs) times
:data:`BAR_MARGIN`.  A pair's bar is the higher of its two venues' (a venue with fewer than
:data:`MIN_CALIBRATION_PAIRS` pairs has none; a pair with no calibrated venue is not read).  Only the candidate pairs
that nothing else linked or flagged, and whose flag could matter (their reviews did not come out together), are
read: never every pair of the store.

A pair above its bar is a possible link (:class:`grebench.store.LinkFlag`) with the numbers in words; until the
operator decides, it counts as linked (the paper's reviews are not sealed; the copy check reads the other's).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

from grebench.ingest._evidence import Evidence, evidence_words
from grebench.ingest._similarity import PaperText
from grebench.store import LinkFlag

#: The share of distinct pairs the bar may flag, before the margin.
FALSE_FLAG_RATE = 0.001
#: The calibrated quantile is raised by this factor (a top quantile of a sample is itself noisy).  On the bundled
#: samples the highest distinct pair of ICLR 2020 reads 0.044 and of ICLR 2026 0.033 with the offline model; ICLR 2026
#: papers against ICLR 2020 ones at most 0.043 (docs/security.md, "Resubmissions by the LM's view of the abstracts").
BAR_MARGIN = 1.1
#: A venue with fewer calibration pairs than this gets no bar of its own.
MIN_CALIBRATION_PAIRS = 100
#: At most this many calibration pairs per venue are read (a deterministic sample by the pair's hash): a season of
#: 20,000 papers proposes 200,000 distinct candidate pairs; 2,000 place a 99.9 % quantile.
MAX_CALIBRATION_PAIRS = 2000
#: Papers of a venue whose candidates are looked up to find its calibration pairs (a deterministic sample).
CALIBRATION_PAPERS = 1000


class AbstractReader(Protocol):
    """The evaluation LM's view of pairs of papers (the scoring layer's :class:`grebench.scoring.LMAbstractReader`)."""

    @property
    def label(self) -> str:
        """The words for the LM, as a flag's reason names it."""
        ...

    def information(self, pairs: Sequence[tuple[PaperText, PaperText]]) -> list[float]:
        """Per pair: the information each abstract gives about the other, as a share of its cost alone, the mean
        of both directions (0: nothing; 1: one fully predicts the other)."""
        ...


@dataclass(frozen=True)
class VenueBar:
    """A venue's calibration: its bar, how many distinct pairs it rests on, and the highest of them."""

    venue: str
    bar: float
    pairs: int
    highest: float


class AbstractViewReport(TypedDict):
    """What the LM view did in one link (the ``abstracts`` entry of :class:`grebench.ingest.LinkCounts`)."""

    estimator: str
    pairs_read: int          # candidate pairs nothing else linked or flagged
    calibration_pairs: int
    not_calibrated: int      # pairs left unread: neither venue has a bar
    flagged: int
    bars: dict[str, dict[str, float | int]]
    seconds: float


def venue_bar(venue: str, values: Sequence[float]) -> VenueBar | None:
    """The bar of a venue from its distinct pairs' statistics; None with fewer than :data:`MIN_CALIBRATION_PAIRS`."""
    if len(values) < MIN_CALIBRATION_PAIRS:
        return None
    ordered = sorted(values)
    rank = math.ceil((len(ordered) + 1) * (1.0 - FALSE_FLAG_RATE))  # conformal: the rank-th of n + 1
    quantile = ordered[min(rank, len(ordered)) - 1]
    return VenueBar(venue, quantile * BAR_MARGIN, len(ordered), ordered[-1])


def _order(pair: tuple[str, str]) -> str:
    return hashlib.blake2b("\x00".join(pair).encode(), digest_size=8).hexdigest()


def calibration_pairs(candidates: Sequence[tuple[str, str]], venue: Mapping[str, str],
                      known: Collection[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """Per venue: its papers' candidate pairs within the venue (ordered, once each), less the pairs ``known`` to be
    versions of one work, at most :data:`MAX_CALIBRATION_PAIRS` by a deterministic hash order."""
    out: dict[str, set[tuple[str, str]]] = {}
    for a, b in candidates:
        pair = (min(a, b), max(a, b))
        if venue.get(a) is not None and venue.get(a) == venue.get(b) and pair not in known:
            out.setdefault(venue[a], set()).add(pair)
    return {v: sorted(pairs, key=_order)[:MAX_CALIBRATION_PAIRS] for v, pairs in out.items()}


def calibration_sample(paper_ids: Collection[str]) -> list[str]:
    """A venue's papers whose candidates give its calibration pairs: at most :data:`CALIBRATION_PAPERS`."""
    return sorted(paper_ids, key=lambda p: _order((p, "")))[:CALIBRATION_PAPERS]


def abstract_flags(reader: AbstractReader, pending: Sequence[tuple[PaperText, PaperText, Evidence]],
                   calibration: Mapping[str, Sequence[tuple[PaperText, PaperText]]],
                   venue: Mapping[str, str]) -> tuple[list[LinkFlag], AbstractViewReport]:
    """Possible links among ``pending`` (candidate pairs nothing else decided, with their other evidence) by the LM
    view, against bars calibrated on ``calibration`` (per venue, pairs of its distinct papers); and what was done.

    Every pair is read in one call of the reader (an estimator fitted or loaded once)."""
    started = time.perf_counter()
    flat = [pair for pairs in calibration.values() for pair in pairs]
    values = reader.information([*flat, *((a, b) for a, b, _ in pending)]) if flat and pending else []
    bars: dict[str, VenueBar] = {}
    at = 0
    for name, pairs in calibration.items():
        found = venue_bar(name, values[at:at + len(pairs)])
        at += len(pairs)
        if found is not None:
            bars[name] = found
    flags: list[LinkFlag] = []
    unread = 0
    for (a, b, e), value in zip(pending, values[at:], strict=True) if values else ():
        own = [bars[v] for v in {venue.get(a.paper_id), venue.get(b.paper_id)} if v in bars]
        if not own:
            unread += 1
            continue
        bar = max(own, key=lambda x: x.bar)
        if value > bar.bar:
            reason = (f"the evaluation LM ({reader.label}) reads the abstracts as the same work: {value:.3f} "
                      f"(information each gives about the other, mean of both directions; bar {bar.bar:.3f}: "
                      f"the {1 - FALSE_FLAG_RATE:.1%} quantile x {BAR_MARGIN} of {bar.pairs} pairs of distinct "
                      f"{bar.venue} papers, highest {bar.highest:.3f}) {evidence_words(e)}")
            flags.append(LinkFlag(a.paper_id, b.paper_id, reason,
                                  {**e.as_dict(), "lm_abstracts": round(value, 4), "lm_bar": round(bar.bar, 4)}))
    if not values:
        unread = len(pending)
    return flags, {"estimator": reader.label, "pairs_read": len(pending) - unread, "calibration_pairs": len(flat),
                   "not_calibrated": unread, "flagged": len(flags),
                   "bars": {v: {"bar": round(x.bar, 4), "pairs": x.pairs, "highest": round(x.highest, 4)}
                            for v, x in sorted(bars.items())},
                   "seconds": round(time.perf_counter() - started, 2)}
