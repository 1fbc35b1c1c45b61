"""How well the copy detector catches disguised copies of public reviews, and how often it flags honest ones.

Run with the product's own install::

    .venv/bin/python benchmarks/copy_detection.py [--papers N] [--seed S] [--markdown]

For every paper of the bundled ICLR 2020 and ICLR 2026 samples (or a seeded ``--papers N`` of each), the paper's
public reviews are disguised by each transformation below, at each strength, and checked against *all* public
reviews of that paper (title and abstract as the paper's own text) with :func:`grebench.bench.copy_evidence`, the
detector that imports, uploads, submitted endpoints and approvals use.  The false-positive rate is every real review
of both samples checked against the *other* reviews of its paper.  Transformations are seeded per paper; fillers and
substitutes are drawn from the vocabulary of all ~700 papers' reviews, so they are as varied as the samples.

The product's detector (:func:`grebench.bench.copy_findings`) also compares a text with the public reviews of *other*
papers that the store's sketch index finds close (:func:`grebench.bench.copies_elsewhere`).  The column "other
papers' reviews (sketch index)" measures that path: an in-memory store of every paper of both samples (but the
held-out ones below), each transformed text checked with its own paper excluded, so the column counts a text only for
copying a public review of another paper.  A row's "caught" is the copy detector, the prose test, the information
view or this column; its false positives are measured on every honest review of both samples the same way (its own
paper excluded) and added to the honest summary line.  In "another paper's reviews + part of every review" the
stand-in (the next sampled paper's reviews) is in the store, as another paper's public reviews would be in the
product.  "unseen reviews (not in the store) + part of every review" is the same partial copy with a stand-in the
sketch index cannot know: the reviews of one of a seeded 40 ICLR 2020 papers held out of the transformed papers and
of the store (real review text that is nobody's public review there).  So the transformed papers are drawn from the
samples less those 40.

``--paraphrase`` prints the paraphrase rows of issue 62 instead: the public reviews' sentences with every content
word replaced by a synonym (a thesaurus of review language, several alternatives per word, or else a distributional
neighbour learnt from the bundled reviews' contexts: a source that knows no list) and reordered, behind one review of a
held-out paper; per-paper tailoring and an adaptive synonymiser that serves, per paper, the most informative option
passing every per-paper check (the word-level checks, the information view, the LM copy check).  Each row shows the LM
copy check (:class:`grebench.scoring.LMCopyCheck`, ``--lm-estimator``) and the submission-level shift test
(:func:`grebench.scoring.shift_test`), then the false-positive rates of both on honest reviews and submissions.

``--paraphrase-lm MODEL_DIR`` adds the row paraphrased by a local instruction-tuned LM (SmolLM2-135M-Instruct's
folder): the same sentences, each rewritten by the model (:class:`LMParaphraser`).

Rows named "adaptive" are an attacker who knows the rules and copies just under them, behind unseen text: printed
to show how much still passes, not as targets.  Strengths marked ``beyond`` destroy most of the review's words (at
70 % substitution a reader gets three words in ten); they are printed to show where the lexical detector stops, not
as targets.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grebench.bench import CopyEvidence, copies_elsewhere, copy_evidence, run_bench
from grebench.bench._copies import bundled_background
from grebench.bench._import import store_background
from grebench.bench._prose import MIN_TOKENS, bundled_word_order, prose_evidence
from grebench.bench._prose import threshold as prose_threshold
from grebench.bench._prose import tokens as prose_tokens
from grebench.ingest import BUNDLED, bundled_source
from grebench.scoring import (
    HUMAN_FACTOR,
    EstimatorHandle,
    ScoredSetup,
    format_p,
    resolve_preprocessor,
    run_scoring,
    score_texts,
)
from grebench.settings import load_settings
from grebench.store import PaperRecord, open_store

Transform = Callable[[list[str], random.Random, list[str]], str]
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"(?<=[,;:.!?])\s+|\n+")
_LOOKALIKE = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "i": "і"})
_SYNONYMS = {
    "paper": "manuscript", "method": "approach", "propose": "introduce", "proposed": "introduced",
    "results": "findings", "experiments": "evaluations", "novel": "new", "limited": "restricted", "show": "demonstrate",
    "shows": "demonstrates", "important": "significant", "however": "nevertheless", "clear": "evident",
    "unclear": "ambiguous", "improve": "enhance", "improves": "enhances", "performance": "accuracy",
    "authors": "writers", "model": "network", "models": "networks", "use": "employ", "uses": "employs",
    "strong": "solid", "weak": "poor", "compare": "contrast", "comparison": "contrast", "missing": "absent",
    "lack": "absence", "lacks": "misses", "interesting": "intriguing", "well": "nicely", "good": "fine",
    "large": "big", "small": "tiny", "many": "numerous", "also": "additionally", "provide": "offer",
    "provides": "offers", "analysis": "study", "evaluation": "assessment", "significant": "substantial",
}


def _words(text: str) -> list[str]:
    return text.split()


def filler(every: int) -> Transform:
    """A word from another paper's reviews after every ``every`` words."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        out: list[str] = []
        for i, word in enumerate(_words(reviews[0]), 1):
            out.append(word)
            if i % every == 0:
                out.append(rng.choice(vocab))
        return " ".join(out)
    return run


def deletion(rate: float) -> Transform:
    """Each word dropped with probability ``rate``."""
    return lambda reviews, rng, _: " ".join(w for w in _words(reviews[0]) if rng.random() >= rate)


def substitution(rate: float, content_only: bool) -> Transform:
    """Each word (or each content word of four letters or more) replaced with probability ``rate`` by a word from
    another paper's reviews: a synonym or misspelling the detector cannot know, the worst case of either."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        return " ".join(rng.choice(vocab) if (not content_only or len(w) >= 4) and rng.random() < rate else w
                        for w in _words(reviews[0]))
    return run


def synonyms(rate: float) -> Transform:
    """Common review words replaced by a synonym with probability ``rate`` (a thesaurus of review language)."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        return " ".join(_SYNONYMS.get(w.lower(), w) if rng.random() < rate else w for w in _words(reviews[0]))
    return run


def typos(rate: float) -> Transform:
    """Each word of three letters or more misspelt with probability ``rate`` (swap, drop, double or change)."""
    def misspell(word: str, rng: random.Random) -> str:
        i = rng.randrange(len(word) - 1)
        kind = rng.randrange(4)
        if kind == 0:
            return word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if kind == 1:
            return word[:i] + word[i + 1:]
        if kind == 2:
            return word[:i] + word[i] + word[i:]
        return word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[i + 1:]
    return lambda reviews, rng, _: " ".join(misspell(w, rng) if len(w) >= 3 and rng.random() < rate else w
                                            for w in _words(reviews[0]))


def swaps(reviews: list[str], rng: random.Random, _: list[str]) -> str:
    """Every pair of adjacent words swapped."""
    words = _words(reviews[0])
    for i in range(0, len(words) - 1, 2):
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def clause_shuffle(reviews: list[str], rng: random.Random, _: list[str]) -> str:
    """Clauses (split at punctuation) in a random order."""
    parts = [p for p in _CLAUSE.split(reviews[0]) if p.strip()]
    rng.shuffle(parts)
    return " ".join(parts)


def lookalikes(reviews: list[str], rng: random.Random, _: list[str]) -> str:
    """Half the letters turned into Cyrillic look-alikes, random case, zero-width spaces, dots inside words, and
    every tenth word spelled out letter by letter."""
    out = []
    for word in _words(reviews[0]):
        if rng.random() < 0.1:
            word = " ".join(word)
        elif rng.random() < 0.2 and len(word) > 3:
            word = word[:2] + "." + word[2:]
        word = "".join((ch.translate(_LOOKALIKE) if rng.random() < 0.5 else ch) for ch in word)
        word = "".join(ch.upper() if rng.random() < 0.3 else ch for ch in word)
        out.append(word.replace(word[:1], word[:1] + "\u200b", 1) if rng.random() < 0.3 else word)
    return " ".join(out)


def mix(count: int) -> Transform:
    """Sentences of ``count`` reviews of the paper interleaved (each contributes every ``count``-th sentence)."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        parts = [[s for s in _SENTENCE.split(r) if s.strip()] for r in reviews[:count]]
        return " ".join(p[i] for i in range(max(len(p) for p in parts)) for k, p in enumerate(parts)
                        if i < len(p) and i % count == k % count)
    return run


def concatenated(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
    """All public reviews of the paper, one after another."""
    return "\n\n".join(reviews)


def partial(share: float) -> Transform:
    """The first ``share`` of the review's sentences, nothing else."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        parts = [s for s in _SENTENCE.split(reviews[0]) if s.strip()]
        return " ".join(parts[:max(1, round(share * len(parts)))])
    return run


_FUNCTION = frozenset("""a about after all also an and any are as at be been but by can could did do does for from
had has have how however i if in into is it its more most no not of on only or other our should so some such than
that the their them then there these they this those to very was we were what when which while who will with would you
your
""".split())  # noqa: SIM905 (a word list reads best as text)


def _content(text: str) -> list[str]:
    """The text's content words (not a function word), as written."""
    return [w for w in _words(text) if w.lower().strip(".,;:!?()[]\"'") not in _FUNCTION]


def _rows(words: list[str], k: int) -> list[str]:
    """``words`` written out in ``k`` interleaved rows (words i, i+k, i+2k, ...): neighbours end up k apart."""
    return [" ".join(words[r::k]) for r in range(k) if words[r::k]]


def transposed(k: int, every_review: bool) -> Transform:
    """The issue's attack: the content words of every public review concatenated (or all words of one review) in
    ``k`` interleaved rows under a heading; words adjacent in the review end up ``k`` apart."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        words = _content(" ".join(reviews)) if every_review else _words(reviews[0])
        return "Weaknesses:\n" + "\n".join(_rows(words, k))
    return run


def shuffled(every_review: bool) -> Transform:
    """A random global shuffle of the content words of every public review (or of all words of one review)."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        words = _content(" ".join(reviews)) if every_review else _words(reviews[0])
        rng.shuffle(words)
        return " ".join(words)
    return run


def spread(k: int) -> Transform:
    """The white-box attack: the content words of every public review in ``k`` interleaved rows, the rows in a random
    order and each row's words shuffled: nothing of the reviews' order is left."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        rows = [r.split() for r in _rows(_content(" ".join(reviews)), k)]
        rng.shuffle(rows)
        for row in rows:
            rng.shuffle(row)
        return "\n".join(" ".join(row) for row in rows)
    return run


def among_filler(k: int) -> Transform:
    """Every content word of every public review, in order, each followed by ``k`` words of other papers' reviews."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        out: list[str] = []
        for word in _content(" ".join(reviews)):
            out += [word, *(rng.choice(vocab) for _ in range(k))]
        return " ".join(out)
    return run


def after_other(share: float, stand_in: list[str]) -> Transform:
    """The issue's readable partial copy: ``stand_in[0]`` (the reviews of another paper, set per paper by
    :func:`main`) standing in for an honest review, then ``share`` of the sentences of every public review of this
    paper (at least one of each), in a random order."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        taken: list[str] = []
        for review in reviews:
            parts = [s for s in _SENTENCE.split(review) if s.strip()]
            taken += rng.sample(parts, max(1, round(share * len(parts)))) if parts else []
        rng.shuffle(taken)
        return stand_in[0] + "\n\n" + " ".join(taken)
    return run


def window_after_unseen(words: int, every: int) -> Transform:
    """An attacker who knows the rules: ``words`` consecutive words of one public review (a seeded window of the
    longest), a word of other papers' reviews inserted after every ``every``-th (none when 0), behind
    :data:`UNSEEN_REVIEW` (text the store has never seen).  Sized at the rules' bounds: what still passes is
    published, not a target."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        source = max(reviews, key=len).split()
        start = rng.randrange(max(1, len(source) - words))
        copied = " ".join(source[start:start + words])
        return UNSEEN_REVIEW[0] + "\n\n" + (filler(every)([copied], rng, vocab) if every else copied)
    return run


#: Another paper's public reviews (set per paper by :func:`main`: the next paper of ``data``, in the store).
OTHER_REVIEW: list[str] = [""]
#: The public reviews of a held-out paper (set per paper by :func:`main`): real review text that is not in the store.
UNSEEN_REVIEW: list[str] = [""]
#: ICLR 2020 papers held out of the transformed papers and of the store, whose reviews stand in for an honest review
#: in "unseen reviews + part of every review".
HELD_OUT_SAMPLE, HELD_OUT_PAPERS = "iclr2020", 40


def chain(*steps: Transform) -> Transform:
    """Transformations applied one after another (the first sees the reviews, the next its output first)."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        text = steps[0](reviews, rng, vocab)
        for step in steps[1:]:
            text = step([text, *reviews[1:]], rng, vocab)
        return text
    return run


#: (name, strength, transformation, a target of the detector).
CASES: list[tuple[str, str, Transform, bool]] = [
    ("verbatim", "-", partial(1.0), True),
    *[("filler word", f"every {k} words", filler(k), True) for k in (1, 2, 3, 4, 5)],
    *[("words deleted", f"{p:.0%}", deletion(p), True) for p in (0.1, 0.2, 0.3, 0.4, 0.5)],
    ("adjacent words swapped", "all pairs", swaps, True),
    ("clauses shuffled", "all", clause_shuffle, True),
    *[("synonyms (thesaurus)", f"{p:.0%} of listed words", synonyms(p), True) for p in (0.5, 1.0)],
    *[("content words substituted", f"{p:.0%}", substitution(p, True), True) for p in (0.1, 0.2, 0.3, 0.4, 0.5)],
    *[("any words substituted", f"{p:.0%}", substitution(p, False), True) for p in (0.1, 0.3, 0.5)],
    *[("misspellings", f"{p:.0%} of words", typos(p), True) for p in (0.1, 0.3, 0.5)],
    ("look-alikes, case, zero-width, dots, spelt-out", "-", lookalikes, True),
    ("two reviews mixed", "-", mix(2), True),
    ("three reviews mixed", "-", mix(3), True),
    ("all reviews concatenated", "-", concatenated, True),
    ("first part of a review", "60%", partial(0.6), True),
    ("first part of a review", "40%", partial(0.4), True),
    ("filler + two reviews mixed", "every 3", chain(mix(2), filler(3)), True),
    ("filler + all reviews", "every 3", chain(concatenated, filler(3)), True),
    ("filler + swaps + 30% substituted", "every 2", chain(filler(2), swaps, substitution(0.3, True)), True),
    ("mixed + shuffled + look-alikes", "two reviews", chain(mix(2), clause_shuffle, lookalikes), True),
    ("deleted + misspelt + filler", "20% / 20% / every 3", chain(deletion(0.2), typos(0.2), filler(3)), True),
    *[("word-order transposition, every review's content words", f"{k} rows", transposed(k, True), True)
      for k in (6, 9, 12)],
    *[("word-order transposition, one review", f"{k} rows", transposed(k, False), True) for k in (6, 9, 12)],
    ("global shuffle, every review's content words", "-", shuffled(True), True),
    ("global shuffle, one review", "-", shuffled(False), True),
    *[("content words spread, rows and words shuffled", f"{k} rows", spread(k), True) for k in (9, 11, 13)],
    *[("content words spread among filler", f"{k} words after each", among_filler(k), True) for k in (3, 9)],
    *[("another paper's reviews + part of every review", f"{p:.0%}", after_other(p, OTHER_REVIEW), True)
      for p in (0.05, 0.1, 0.2, 0.3)],
    *[("unseen reviews (not in the store) + part of every review", f"{p:.0%}", after_other(p, UNSEEN_REVIEW), True)
      for p in (0.05, 0.1, 0.2, 0.3)],
    *[("adaptive: one review's words verbatim after unseen reviews", f"{n} words", window_after_unseen(n, 0), False)
      for n in (20, 25, 30)],
    *[("adaptive: a word inserted every 7 after unseen reviews", f"{n} words", window_after_unseen(n, 7), False)
      for n in (40, 80, 120, 160)],
    ("content words substituted", "70% (beyond)", substitution(0.7, True), False),
    ("words deleted", "70% (beyond)", deletion(0.7), False),
    ("first part of a review", "20% (beyond)", partial(0.2), False),
]


def load(papers: int | None, seed: int, leave_out: frozenset[str] = frozenset()) -> list[tuple[str, str, list[str]]]:
    """(label, paper text, reviews) of both bundled samples (a seeded ``papers`` of each, or all), but the labels in
    ``leave_out``."""
    out = []
    for name in BUNDLED:
        records = [p for p in bundled_source(name).fetch() if hasattr(p, "reviews") and len(p.reviews) >= 2
                   and f"{name}/{p.paper_id}" not in leave_out]
        if papers is not None:
            records = random.Random(seed).sample(records, min(papers, len(records)))
        out += [(f"{name}/{p.paper_id}", "\n".join(t for t in (p.title, p.abstract) if t), [r.text for r in p.reviews])
                for p in records]
    return out


def _records(labels: set[str]) -> list[PaperRecord]:
    return [p for name in BUNDLED for p in bundled_source(name).fetch()
            if isinstance(p, PaperRecord) and f"{name}/{p.paper_id}" in labels]


def held_out(seed: int) -> list[tuple[str, str, list[str]]]:
    """A seeded :data:`HELD_OUT_PAPERS` of the :data:`HELD_OUT_SAMPLE` sample (label, paper text, reviews): never
    transformed, never in :class:`SketchIndex`'s store."""
    records = [p for p in bundled_source(HELD_OUT_SAMPLE).fetch() if isinstance(p, PaperRecord) and p.reviews]
    return [(f"{HELD_OUT_SAMPLE}/{p.paper_id}", "\n".join(t for t in (p.title, p.abstract) if t),
             [r.text for r in p.reviews])
            for p in random.Random(f"{seed}/held out").sample(records, min(HELD_OUT_PAPERS, len(records)))]


class SketchIndex:
    """The product's search of *other* papers' public reviews (:func:`grebench.bench.copies_elsewhere`, the half of
    :func:`grebench.bench.copy_findings` beyond the paper's own reviews): an in-memory store of every paper of both
    bundled samples but the ``held_out`` ones, so that its sketch index covers every other public review, as a
    store of the season would, and each text checked with its own paper left out."""

    def __init__(self, held_out: set[str]) -> None:
        self.store = open_store(None)
        papers = [p for name in BUNDLED for p in bundled_source(name).fetch()
                  if isinstance(p, PaperRecord) and f"{name}/{p.paper_id}" not in held_out]
        with self.store.transaction():
            for paper in papers:
                self.store.upsert_paper(paper)
        self.papers = len(papers)
        self.background = store_background(self.store)  # what copy_findings compares with

    def findings(self, items: list[tuple[str, str, str]]) -> list[CopyEvidence | None]:
        """:func:`copies_elsewhere` of each (label, paper text, text), its own paper excluded."""
        reviews = [(label.split("/", 1)[1], text) for label, _, text in items]
        exclude = {pid: {pid} for pid, _ in reviews}
        own = {label.split("/", 1)[1]: paper for label, paper, _ in items}
        return copies_elsewhere(self.store, reviews, exclude, self.background, own)


class InformationView:
    """The information view (:func:`grebench.scoring.information_flags`'s rule) on texts that are no stored
    generation: a temporary store of the sampled papers, the human baseline scored with ``estimator``, and each
    text scored against its paper's references through the score stage's own path (:func:`score_texts`)."""

    def __init__(self, labels: set[str], estimator: str, workdir: Path, store_file: Path | None = None) -> None:
        env = {"GREBENCH_DATA_DIR": str(workdir), "GREBENCH_ESTIMATOR": estimator, "GREBENCH_PAPERS": "all",
               "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": "", "GREBENCH_ATTRIBUTION": "off"}
        self.settings = load_settings(env=env)
        # in memory, or a file that holds the scores and the log-prob cache, so a stopped run resumes (--info-store)
        self.store = open_store(store_file)
        records = _records(labels)
        stored = {r["paper_id"] for r in self.store.rows("SELECT paper_id FROM papers")}
        if stored and stored != {p.paper_id for p in records}:
            raise SystemExit(f"--info-store {store_file} holds another sample of papers ({len(stored)}): give the "
                             "same --papers and --seed as the run that made it, or another file")
        if not stored:
            with self.store.transaction():
                for paper in records:
                    self.store.upsert_paper(paper)
            run_bench(self.store, self.settings, self.store.start_run("bench", {}), controls=set())
        # the view's parts, built once and held for its scorings (the estimator is closed with the view: close)
        self.handle = EstimatorHandle(estimator, self.settings)
        self.preprocessor = resolve_preprocessor("rules", self.settings, self.store)
        summary = run_scoring(self.store, self.settings, None, ["gem-s"], handle=self.handle,
                              preprocessor=self.preprocessor, controls=set())
        self.setup = ScoredSetup(estimator, "rules", summary["estimator"], summary["preprocessor"])
        human: dict[str, dict[str, float]] = {}
        for r in self.store.rows("SELECT paper_id, reference_review_id AS ref, greatest(pmi, 0) / -marginal AS share "
                                 "FROM scores WHERE candidate = 'human' AND metric = 'gem-s' AND marginal < 0"):
            human.setdefault(r["paper_id"], {})[r["ref"]] = float(r["share"])
        self.human = human
        sums = sorted(sum(v.values()) for v in human.values())
        self.typical = sums[len(sums) // 2] if sums else 0.0
        self.refs = {r["paper_id"]: {x["review_id"]: x["text"] for x in self.store.rows(
            "SELECT r.review_id, (SELECT text FROM review_versions v WHERE v.review_id = r.review_id ORDER BY version "
            "DESC LIMIT 1) AS text FROM reviews r WHERE r.paper_id = ?", [r["paper_id"]])}
            for r in self.store.rows("SELECT paper_id FROM baseline_splits")}

    def close(self) -> None:
        """Release the view's evaluation LM (what its handle built)."""
        self.handle.close()

    def ratios(self, items: list[tuple[str, str]]) -> list[float | None]:
        """Candidate's summed share over the human bar (``HUMAN_FACTOR`` or more is a flag) of each (paper, text)."""
        scored = score_texts(self.store, self.settings, self.setup, "gem-s", items, handle=self.handle,
                             preprocessor=self.preprocessor)
        out: list[float | None] = []
        self.means: list[float | None] = []  # the mean share per reference (what the shift tests compare)
        for pid, text in items:
            key = (pid, hashlib.sha256(text.encode("utf-8")).hexdigest())
            pmis, margs = scored.pmis.get(key, {}), scored.marginals.get(key, {})
            refs = [r for r in pmis if r in margs and margs[r] < 0]
            if not refs or pid not in self.human:
                out.append(None)
                self.means.append(None)
                continue
            mine = sum(max(pmis[r], 0.0) / -margs[r] for r in refs)
            self.means.append(mine / len(refs))
            human = sum(self.human[pid].get(r, 0.0) for r in refs)
            bar = max(human, self.typical)
            out.append(mine / bar if bar > 0 else None)
        return out


# --- paraphrase (issue 62) -----------------------------------------------------------------------------------------

#: A thesaurus of review language: several alternatives per word, one drawn per occurrence.
_THESAURUS: dict[str, tuple[str, ...]] = {k: tuple(v.split("|")) for k, v in (line.split("=") for line in """
paper=manuscript|submission|work|article
method=approach|technique|procedure|scheme
methods=approaches|techniques|procedures
approach=method|strategy|technique
propose=introduce|put forward|present
proposed=introduced|put-forward|presented
proposes=introduces|presents|puts forward
results=findings|outcomes|numbers
result=finding|outcome
experiments=evaluations|trials|empirical studies
experiment=evaluation|trial|test
experimental=empirical|evaluative
novel=new|original|fresh
novelty=originality|newness
limited=restricted|modest|narrow
show=demonstrate|exhibit|reveal
shows=demonstrates|exhibits|reveals
showed=demonstrated|revealed
important=significant|crucial|key
however=nevertheless|yet|still
clear=evident|plain|obvious
clearly=evidently|plainly
unclear=ambiguous|vague|murky
improve=enhance|boost|raise
improves=enhances|boosts|raises
improvement=gain|enhancement|boost
improvements=gains|enhancements
performance=accuracy|effectiveness|behaviour
authors=writers|researchers|submitters
model=network|system|architecture
models=networks|systems|architectures
use=employ|utilise|apply
uses=employs|utilises|applies
using=employing|utilising|applying
used=employed|utilised|applied
strong=solid|robust|convincing
weak=poor|feeble|unconvincing
compare=contrast|benchmark|measure against
comparison=contrast|benchmarking
comparisons=contrasts|benchmarks
missing=absent|lacking|omitted
lack=absence|shortage|want
lacks=misses|is without|wants
interesting=intriguing|appealing|engaging
good=fine|decent|solid
large=big|sizeable|substantial
small=tiny|modest|little
many=numerous|several|a lot of
also=additionally|moreover|further
provide=offer|give|supply
provides=offers|gives|supplies
analysis=study|examination|investigation
evaluation=assessment|appraisal|testing
significant=substantial|notable|considerable
significantly=substantially|notably|considerably
problem=issue|difficulty|challenge
problems=issues|difficulties|challenges
task=problem|objective|job
tasks=problems|objectives|jobs
training=learning|fitting|optimisation
train=fit|learn|optimise
trained=fitted|learned|optimised
dataset=benchmark|corpus|collection
datasets=benchmarks|corpora|collections
baseline=reference method|comparison point
baselines=reference methods|comparison points
framework=pipeline|system|setup
effective=efficient|successful|useful
difficult=hard|challenging|tough
easy=simple|straightforward
simple=plain|basic|straightforward
writing=exposition|presentation|prose
written=composed|presented|expressed
well=nicely|properly|ably
hard=difficult|tough
understand=grasp|follow|comprehend
explain=clarify|justify|elucidate
discuss=address|examine|consider
discussion=treatment|examination|debate
question=doubt|query|concern
concern=worry|issue|reservation
concerns=worries|issues|reservations
claim=assertion|statement|contention
claims=assertions|statements|contentions
theoretical=formal|analytical
empirical=experimental|practical
demonstrate=show|establish|prove
demonstrates=shows|establishes|proves
approach=method|strategy
contribution=advance|addition|offering
contributions=advances|additions|offerings
idea=concept|notion|insight
ideas=concepts|notions|insights
existing=current|prior|available
previous=prior|earlier|past
recent=new|latest|current
work=research|study|effort
works=studies|papers|efforts
better=superior|stronger|improved
worse=inferior|weaker|poorer
high=elevated|large|great
low=reduced|small|little
""".strip().splitlines())}


class Neighbours:
    """Distributional synonyms: for each frequent content word of the bundled reviews, the words used in the most
    similar contexts (co-occurrence within two words, reduced by SVD), a synonym source that knows no list."""

    def __init__(self, texts: list[str], size: int = 4000, dims: int = 64) -> None:
        import numpy as np
        toks = [re.findall(r"[a-z]+", t.lower()) for t in texts]
        counts = Counter(w for ts in toks for w in ts)
        vocab = [w for w, _ in counts.most_common(size)]
        index = {w: i for i, w in enumerate(vocab)}
        m = np.zeros((len(vocab), len(vocab)), dtype=np.float32)
        for ts in toks:
            ids = [index.get(w, -1) for w in ts]
            for i, a in enumerate(ids):
                if a < 0:
                    continue
                for b in ids[max(0, i - 2):i] + ids[i + 1:i + 3]:
                    if b >= 0:
                        m[a, b] += 1
        m = np.log1p(m)
        u, s, _ = np.linalg.svd(m, full_matrices=False)
        vecs = u[:, :dims] * s[:dims]
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-9
        content = [i for i, w in enumerate(vocab) if w not in _FUNCTION and len(w) >= 4]
        sims = vecs[content] @ vecs[content].T
        self.near: dict[str, list[str]] = {}
        for row, i in enumerate(content):
            order = np.argsort(-sims[row])[1:6]
            self.near[vocab[i]] = [vocab[content[j]] for j in order]

    def get(self, word: str, rng: random.Random) -> str | None:
        options = self.near.get(word.lower())
        return rng.choice(options[:3]) if options else None


#: Set by :func:`main` when a paraphrase row runs (the neighbours of the bundled reviews' words).
NEIGHBOURS: list[Neighbours] = []


def _keep_case(src: str, new: str) -> str:
    return new[:1].upper() + new[1:] if src[:1].isupper() else new


def synonymise(sentence: str, rng: random.Random, rate: float = 1.0) -> str:
    """Each content word replaced (with probability ``rate``) by a synonym from the thesaurus, else a distributional
    neighbour; names, numbers and symbols (a capital inside, a digit) are kept, as a paraphraser keeps terms."""
    out = []
    for token in sentence.split():
        m = re.match(r"^(\W*)([A-Za-z][a-z]+)(\W*)$", token)
        if not m or m.group(2).lower() in _FUNCTION or rng.random() >= rate:
            out.append(token)
            continue
        lead, word, tail = m.groups()
        options = _THESAURUS.get(word.lower())
        new = rng.choice(options) if options else (NEIGHBOURS[0].get(word, rng) if NEIGHBOURS else None)
        out.append(lead + _keep_case(word, new or word) + tail)
    return " ".join(out)


def chosen_sentences(reviews: list[str], share: float, rng: random.Random) -> list[str]:
    """``share`` of the sentences (three words or more) of every review, at least one each: what the paraphrase
    rows copy."""
    taken: list[str] = []
    for review in reviews:
        parts = [s for s in _SENTENCE.split(review) if len(s.split()) >= 3]
        if share > 0 and parts:
            taken += rng.sample(parts, max(1, round(share * len(parts))))
    return taken


def paraphrased(share: float, stand_in: list[str], rate: float = 1.0) -> Transform:
    """The issue's paraphrase: ``stand_in[0]`` (honest-looking text of another paper, set per paper by :func:`main`),
    then ``share`` of the sentences of every public review (at least one each), every content word synonymised
    (:func:`synonymise`, at ``rate``), the sentences in a random order and some clause pairs swapped."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        out = []
        for sentence in chosen_sentences(reviews, share, rng):
            clauses = [c for c in re.split(r",\s+", sentence) if c]
            if len(clauses) >= 2 and rng.random() < 0.5:
                clauses = clauses[1:] + clauses[:1]
            out.append(synonymise(", ".join(clauses), rng, rate))
        rng.shuffle(out)
        return (stand_in[0] + "\n\n" + " ".join(out)).strip()
    return run


class LMParaphraser:
    """Sentences rewritten by a local instruction-tuned LM (``--paraphrase-lm``: SmolLM2-135M-Instruct's folder, the
    product's own model), one sentence a prompt, greedy; answers cached in a JSON file beside the model's folder
    (keyed by the sentence's SHA-256), so a rerun generates only new sentences."""

    PROMPT = ("Rewrite the following sentence from a peer review in your own words. Keep its meaning, change the "
              "wording. Answer with the rewritten sentence only.\n\n{sentence}")

    def __init__(self, model_dir: str, cache: Path) -> None:
        import json

        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
        self.cache_path = cache
        self.cache: dict[str, str] = json.loads(cache.read_text()) if cache.exists() else {}
        self.generated = 0

    def rewrite(self, sentences: list[str], batch: int = 16) -> list[str]:
        import json

        import torch

        keys = [hashlib.sha256(s.encode()).hexdigest()[:24] for s in sentences]
        todo = sorted({k: s for k, s in zip(keys, sentences, strict=True) if k not in self.cache}.items())
        for at in range(0, len(todo), batch):
            chunk = todo[at:at + batch]
            prompts = [self.tokenizer.apply_chat_template([{"role": "user", "content": self.PROMPT.format(sentence=s)}],
                                                          tokenize=False, add_generation_prompt=True)
                       for _, s in chunk]
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True)
            with torch.inference_mode():
                out = self.model.generate(**enc, max_new_tokens=80, do_sample=False, repetition_penalty=1.1,
                                          pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
            for (key, sentence), row in zip(chunk, out[:, enc["input_ids"].shape[1]:], strict=True):
                text = " ".join(self.tokenizer.decode(row, skip_special_tokens=True).split())
                self.cache[key] = text or sentence
            self.generated += len(chunk)
            self.cache_path.write_text(json.dumps(self.cache))
        return [self.cache[k] for k in keys]


def lm_paraphrased(share: float, stand_in: list[str], lm: LMParaphraser) -> Transform:
    """:func:`paraphrased`'s choice of sentences (``share`` of every public review, at least one each), each
    rewritten by the local LM instead of the thesaurus, shuffled, behind ``stand_in[0]``."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        out = lm.rewrite(chosen_sentences(reviews, share, rng))
        rng.shuffle(out)
        return (stand_in[0] + "\n\n" + " ".join(out)).strip()
    return run


def _judgment_papers(records: list[tuple[str, str, list[str], list[str]]]) -> dict[str, Any]:
    """PaperReviews (the LM copy check's view) of (label, abstract, review ids, review texts)."""
    from grebench.scoring import PaperReviews, rules_judgment_lines
    return {label: PaperReviews(label, abstract, {rid: rules_judgment_lines(text) for rid, text in zip(ids, texts,
                                                                                                       strict=True)})
            for label, abstract, ids, texts in records}


def paraphrase_section(args: argparse.Namespace, data: list[tuple[str, str, list[str]]],
                       unseen: list[tuple[str, str, list[str]]], background: Any, prose_model: Any,
                       view: InformationView | None) -> None:
    """The paraphrase rows (issue 62): each attack against the word-level checks, the information view, the LM copy
    check (:class:`grebench.scoring.LMCopyCheck`, bar cross-fitted: calibrated on the *other* sample's honest
    reviews) and the submission-level shift test (:func:`grebench.scoring.shift_test`); then the false-positive rates
    of the LM check on every honest review of both samples and of the shift test on honest submissions."""
    from grebench.scoring import (
        CachedLogprobs,
        LMCopyCheck,
        conformal_bar,
        gap_test,
        rules_judgment_lines,
        shift_test,
    )
    from grebench.scoring.estimators import EstimatorHandle as Handle

    started = time.monotonic()
    records: dict[str, list[tuple[str, str, list[str], list[str]]]] = {name: [] for name in BUNDLED}
    for name in BUNDLED:
        chosen = None
        if args.honest_papers is not None:
            chosen = {label for label, _, _ in [*load(args.honest_papers, args.seed + 1), *data]}
        for p in bundled_source(name).fetch():
            label = f"{name}/{p.paper_id}"
            if isinstance(p, PaperRecord) and len(p.reviews) >= 2 and (chosen is None or label in chosen):
                records[name].append((label, p.abstract, [r.review_id for r in p.reviews], [r.text for r in p.reviews]))
    papers = {name: _judgment_papers(recs) for name, recs in records.items()}
    corpus = {label: ["\n".join(lines) for lines in pr.reviews.values() if lines]
              for by in papers.values() for label, pr in by.items()}
    settings = load_settings(env={"GREBENCH_DATA_DIR": args.data_dir or tempfile.mkdtemp(),
                                  "GREBENCH_ESTIMATOR": args.lm_estimator})
    handle = Handle(args.lm_estimator, settings)
    cache = open_store(Path(args.lm_cache) if args.lm_cache else None)
    try:
        estimator = handle.get(corpus if handle.info.needs_corpus else None)
        # the product's log-prob cache in front of the LM: a text checked in an earlier row (the tailored rows pick
        # their texts among the rows') costs nothing again, which makes the SmolLM2 rows affordable on a CPU
        cached = CachedLogprobs(cache, estimator, "LM copy check")
        checks = {name: LMCopyCheck(estimator, papers[name], logprobs=cached) for name in BUNDLED}
        for check in checks.values():
            check.calibrate()
        # cross-fitted: each paper's bar calibrated on the honest reviews of the other half of its sample's papers
        fold: dict[str, int] = {}
        bars: dict[tuple[str, int], float] = {}
        honest_flags = {name: 0 for name in BUNDLED}
        for name, check in checks.items():
            fold.update({pid: k % 2 for k, pid in enumerate(sorted(set(check.calibration_papers)))})
            for half in (0, 1):
                bars[(name, half)] = conformal_bar([v for v, pid in zip(check.calibration, check.calibration_papers,
                                                                        strict=True) if fold[pid] != half])
            honest_flags[name] = sum(v >= bars[(name, fold[pid])]
                                     for v, pid in zip(check.calibration, check.calibration_papers, strict=True))
        honest_n = {name: len(checks[name].calibration) for name in BUNDLED}
        # the LM statistic of every honest review per paper (the LM shift test's honest reviewers)
        honest_z: dict[str, list[float]] = {}
        for check in checks.values():
            for v, pid in zip(check.calibration, check.calibration_papers, strict=True):
                honest_z.setdefault(pid, []).append(v)
        calibration_requests = sum(c.requests for c in checks.values())
        calibration_s = time.monotonic() - started

        def lm_check(texts: list[str]) -> list[Any]:
            out = []
            for (label, _, _), text in zip(data, texts, strict=True):
                check = checks[label.split("/", 1)[0]]
                check.bar = bars[(label.split("/", 1)[0], fold[label])]
                out.append(check.check([(label, rules_judgment_lines(text))])[0])
            return out

        def lm_shift(lm: list[Any]) -> Any:
            return shift_test({e.paper_id: e.statistic for e in lm}, honest_z)

        means: dict[int, list[float | None]] = {}  # id(ratios) -> the mean shares per reference of those texts

        def per_paper(texts: list[str]) -> tuple[list[bool], list[bool], list[float | None], list[Any]]:
            lex = [copy_evidence(t, reviews, paper, background).copied or not prose_evidence(t, prose_model).prose
                   for t, (_, paper, reviews) in zip(texts, data, strict=True)]
            ratios = (view.ratios([(label.split("/", 1)[1], t) for t, (label, _, _) in zip(texts, data, strict=True)])
                      if view is not None else [None] * len(texts))
            means[id(ratios)] = list(view.means) if view is not None else [None] * len(texts)
            info = [r is not None and r >= HUMAN_FACTOR for r in ratios]
            return lex, info, ratios, lm_check(texts)

        def info_shift(ratios: list[float | None]) -> Any:
            return shift_test({label.split("/", 1)[1]: m for (label, _, _), m in zip(data, means[id(ratios)],
                                                                                     strict=True) if m is not None},
                              honest_ratios)

        # the honest reviewers of each paper, as the shift test sees them: the human baseline and every reference
        # scored as a candidate against the others (information ratios over the human bar)
        honest_ratios: dict[str, list[float]] = {}
        if view is not None:
            items = [(label.split("/", 1)[1], text) for label, _, _ in data
                     for text in view.refs.get(label.split("/", 1)[1], {}).values() if text]
            view.ratios(items)
            for (pid, _), r in zip(items, view.means, strict=True):
                if r is not None:
                    honest_ratios.setdefault(pid, []).append(r)
            for pid, refs in view.human.items():
                if refs and pid in honest_ratios:
                    honest_ratios[pid].append(sum(refs.values()) / len(refs))
        # honest submissions: per paper one honest reviewer drawn at random, tested against the others
        honest_held = 0
        draws = 200 if honest_ratios else 0
        for k in range(draws):
            rng = random.Random(f"{args.seed}/honest submission/{k}")
            mine, rest = {}, {}
            for pid, vals in honest_ratios.items():
                if len(vals) >= 2:
                    i = rng.randrange(len(vals))
                    mine[pid], rest[pid] = vals[i], vals[:i] + vals[i + 1:]
            honest_held += shift_test(mine, rest).held
        honest_z_held = 0
        for k in range(draws):
            rng = random.Random(f"{args.seed}/honest LM submission/{k}")
            mine, rest = {}, {}
            for (label, _, _) in data:
                vals = honest_z.get(label, [])
                if len(vals) >= 2:
                    i = rng.randrange(len(vals))
                    mine[label], rest[label] = vals[i], vals[:i] + vals[i + 1:]
            honest_z_held += shift_test(mine, rest).held
        # the sealed-gap test on honest submissions: one honest reviewer per paper, a random half of the papers sealed
        honest_gap_held = honest_gap_z_held = 0
        for k in range(draws):
            rng = random.Random(f"{args.seed}/honest gap submission/{k}")
            mine, rest, mz, rz = {}, {}, {}, {}
            for (label, _, _) in data:
                pid = label.split("/", 1)[1]
                vals, zs = honest_ratios.get(pid, []), honest_z.get(label, [])
                if len(vals) >= 2:
                    i = rng.randrange(len(vals))
                    mine[pid], rest[pid] = vals[i], vals[:i] + vals[i + 1:]
                if len(zs) >= 2:
                    i = rng.randrange(len(zs))
                    mz[label], rz[label] = zs[i], zs[:i] + zs[i + 1:]
            cut = set(rng.sample([label for label, _, _ in data], len(data) // 2))
            honest_gap_held += gap_test(mine, rest, {pid.split("/", 1)[1] for pid in cut}).held
            honest_gap_z_held += gap_test(mz, rz, cut).held

        rows = []
        options: dict[str, list[tuple[Any, ...]]] = {}  # (name, texts, passed, ratios, LM findings, passed by default)
        generic = ("generic review only (another paper's)", "-", paraphrased(0.0, UNSEEN_REVIEW))
        cases = [generic, *[("paraphrase: synonyms + reordered, after a generic review", f"{p:.0%} of sentences",
                             paraphrased(p, UNSEEN_REVIEW)) for p in (0.1, 0.3, 1.0)],
                 *[("paraphrase: half the content words, after a generic review", f"{p:.0%} of sentences",
                    paraphrased(p, UNSEEN_REVIEW, 0.5)) for p in (0.3, 0.6)]]
        if args.paraphrase_lm:  # the "paraphrase by the local LM": SmolLM2-135M-Instruct rewrites sentences
            rewriter = LMParaphraser(args.paraphrase_lm, Path(args.paraphrase_lm).parent / "paraphrases.json")
            cases += [("paraphrase by the local LM, after a generic review", f"{p:.0%} of sentences",
                       lm_paraphrased(p, UNSEEN_REVIEW, rewriter)) for p in (0.3,)]
        for name, strength, transform in cases:
            texts = []
            for k, (label, _, reviews) in enumerate(data):
                rng = random.Random(f"{args.seed}/{label}/{name}/{strength}")
                UNSEEN_REVIEW[0] = unseen[k % len(unseen)][2][0]
                texts.append(transform(list(reviews), rng, []))
            lex, info, ratios, lm = per_paper(texts)
            passed = [not (a or b or c.copied) for a, b, c in zip(lex, info, lm, strict=True)]
            # what the product's default settings check per paper (lm_copy_estimator is off by default)
            passed_default = [not (a or b) for a, b in zip(lex, info, strict=True)]
            options.setdefault("all", []).append((f"{name}, {strength}", texts, passed, ratios))
            if name.startswith("paraphrase"):
                options.setdefault("tailor", []).append((f"{name}, {strength}", texts, passed, ratios))
            shift = info_shift(ratios)
            options.setdefault("all", [])[-1] += (lm, passed_default)
            if name.startswith("paraphrase"):
                options["tailor"][-1] += (lm, passed_default)
            rows.append((name, strength, texts, lex, info, lm, ratios, shift, lm_shift(lm)))

        def tailored(pool: list[Any], fixed: str | None) -> tuple[list[str], list[float | None]]:
            """Per paper, the option with the most information among those passing every per-paper check (or only
            ``fixed``'s text where it passes, else the generic review)."""
            texts, ratios = [], []
            base = options["all"][0]
            for i in range(len(data)):
                good = [(o[3][i] or 0.0, o[1][i], o[3][i]) for o in pool
                        if o[2][i] and (fixed is None or o[0] == fixed)]
                pick = max(good, key=lambda g: g[0]) if good else (0.0, base[1][i], base[3][i])
                texts.append(pick[1])
                ratios.append(pick[2])
            return texts, ratios

        def white_box(*, sealed_half: bool, lm_tests: bool, fallback: bool) -> tuple[list[str], list[Any]]:
            """An attacker who knows the rules: starting from the generic review everywhere, it upgrades papers (with
            ``sealed_half`` only the public ones: the sealed ones have nothing to copy), largest information gain
            first, to options that pass the per-paper checks, while no submission-level test holds the submission:
            the information shift test, with ``sealed_half`` the information sealed-gap test, and with ``lm_tests``
            the LM copy check and the LM statistic's tests too (``lm_tests`` off: the product's default checks,
            ``lm_copy_estimator`` being off by default).  ``fallback``: where a paper's richest option would get the
            submission held, it tries that paper's next one (only options richer than the generic review)."""
            base = options["all"][0]
            texts, mean, stats = list(base[1]), list(means[id(base[3])]), [e.statistic for e in base[4]]
            tries = []
            for i, (label, _, _) in enumerate(data):
                if sealed_half and label in sealed_labels:
                    continue
                good = [o for o in options["all"][1:] if (o[2][i] if lm_tests else o[5][i]) and o[3][i] is not None]
                gains = [((o[3][i] or 0.0) - (base[3][i] or 0.0), i, o) for o in good]
                if fallback:
                    tries += [g for g in gains if g[0] > 0]
                elif good:
                    best = max(good, key=lambda o: o[3][i])
                    tries.append(((best[3][i] or 0.0) - (base[3][i] or 0.0), i, best))

            def held(trial_m: list[float | None], trial_z: list[float]) -> bool:
                if sealed_half:
                    info_sub, z_sub = mixed(trial_m, trial_z)
                    tests: list[Any] = [lambda: gap_test(info_sub, honest_ratios, sealed_pids),
                                        lambda: shift_test(info_sub, honest_ratios)]
                    if lm_tests:
                        tests += [lambda: gap_test(z_sub, honest_z, sealed_labels), lambda: shift_test(z_sub, honest_z)]
                else:
                    sub = {label.split("/", 1)[1]: m for (label, _, _), m in zip(data, trial_m, strict=True)
                           if m is not None}
                    z = {label: v for (label, _, _), v in zip(data, trial_z, strict=True)}
                    tests = [lambda: shift_test(sub, honest_ratios)]  # (each test run only when needed)
                    if lm_tests:
                        tests.append(lambda: shift_test(z, honest_z))
                return any(test().held for test in tests)

            done: set[int] = set()
            for _, i, option in sorted(tries, key=lambda g: (-g[0], g[1], g[2][0])):
                if i in done:
                    continue
                trial_m, trial_z = list(mean), list(stats)
                trial_m[i], trial_z[i] = means[id(option[3])][i], option[4][i].statistic
                if held(trial_m, trial_z):
                    continue
                texts[i], mean, stats = option[1][i], trial_m, trial_z
                done.add(i)
            return texts, []  # (the rows score the texts again)

        # The sealed half: the papers whose reviews were still hidden when the endpoint wrote.  There it has nothing
        # to copy and serves its own review (the generic one); the copy goes only where the reviews were public.
        sealed_labels = set(random.Random(f"{args.seed}/sealed half").sample([label for label, _, _ in data],
                                                                              len(data) // 2))
        sealed_pids = {label.split("/", 1)[1] for label in sealed_labels}

        def mixed(i_means: list[float | None], i_stats: list[float]) -> tuple[dict[str, float], dict[str, float]]:
            base = options["all"][0]
            b_means, b_stats = means[id(base[3])], [e.statistic for e in base[4]]
            info_sub, z_sub = {}, {}
            for j, (label, _, _) in enumerate(data):
                sealed = label in sealed_labels
                m = b_means[j] if sealed else i_means[j]
                if m is not None:
                    info_sub[label.split("/", 1)[1]] = m
                z_sub[label] = b_stats[j] if sealed else i_stats[j]
            return info_sub, z_sub

        def sealed_tests(i_means: list[float | None], i_stats: list[float]) -> tuple[Any, Any, bool]:
            """(gap test on information, gap test on the LM statistic, held by any submission-level test) of the
            submission that copies only on the public half."""
            info_sub, z_sub = mixed(i_means, i_stats)
            gap, zgap = gap_test(info_sub, honest_ratios, sealed_pids), gap_test(z_sub, honest_z, sealed_labels)
            held = (gap.held or zgap.held or shift_test(info_sub, honest_ratios).held
                    or shift_test(z_sub, honest_z).held)
            return gap, zgap, held

        fixed = "paraphrase: synonyms + reordered, after a generic review, 30% of sentences"
        for name, strength, (texts, _) in (
                ("per-paper tailoring: the 30% paraphrase where it passes every check", "-",
                 tailored(options["tailor"], fixed)),
                ("adaptive synonymiser: per paper the most informative option passing every check", "-",
                 tailored(options["all"], None)),
                ("white box: as many papers upgraded as the shift tests let through", "-",
                 white_box(sealed_half=False, lm_tests=True, fallback=False)),
                ("white box with a sealed half: public papers upgraded while no test holds it, sealed-gap included",
                 "-", white_box(sealed_half=True, lm_tests=True, fallback=False)),
                ("white box against the default checks (LM copy check off): the information shift test only", "-",
                 white_box(sealed_half=False, lm_tests=False, fallback=True)),
                ("white box against the default checks with a sealed half: information shift and sealed-gap tests",
                 "-", white_box(sealed_half=True, lm_tests=False, fallback=True))):
            lex, info, ratios, lm = per_paper(texts)
            rows.append((name, strength, texts, lex, info, lm, ratios, info_shift(ratios), lm_shift(lm)))
        # every row again as a submission that copies only where the reviews were public (the sealed half: its own,
        # generic review), through the submission-level tests with the sealed-gap test
        generic_ratios = rows[0][6]
        sealed_rows = []
        for row in rows:
            ratios = row[6]
            gap, zgap, held = sealed_tests(means[id(ratios)], [e.statistic for e in row[5]])
            mixed_ratios = [g if label in sealed_labels else r
                            for (label, _, _), r, g in zip(data, ratios, generic_ratios, strict=True)]
            known = [r for r in mixed_ratios if r is not None]
            caught = sum(a or b or c.copied for (label, _, _), a, b, c in zip(data, row[3], row[4], row[5],
                                                                              strict=True)
                         if label not in sealed_labels)
            sealed_rows.append((sum(known) / len(known) if known else float("nan"), gap, zgap, held, caught))
    finally:
        handle.close()
        cache.close()
    elapsed = time.monotonic() - started
    print(f"\nParaphrase rows (issue 62), LM copy check with {args.lm_estimator}, information view with "
          f"{args.estimator}, {len(data)} papers:")
    if args.markdown:
        print("\n| transformation | strength | caught per paper | word-level | information view | LM copy check "
              "| LM statistic, median | information / human, mean | shift test (information) | shift test (LM) "
              "| held |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, strength, _, lex, info, lm, ratios, shift, zshift in rows:
        caught = sum(a or b or c.copied for a, b, c in zip(lex, info, lm, strict=True))
        stats = sorted(e.statistic for e in lm)
        known = [r for r in ratios if r is not None]
        mean = sum(known) / len(known) if known else float("nan")
        p = format_p(shift.p, shift.papers)
        cells = (name, strength, f"{caught}/{len(lex)}", str(sum(lex)), str(sum(info)), str(sum(e.copied for e in lm)),
                 f"{stats[len(stats) // 2]:.2f}", f"{mean:.2f}", f"{shift.ratio:.2f}x, {p}",
                 f"{zshift.ratio:.2f}x, {format_p(zshift.p, zshift.papers)}",
                 "yes" if shift.held or zshift.held else "no")
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(f"{name:<80} {strength:<18} caught {cells[2]:>6} words {cells[3]:>3} info {cells[4]:>3} "
                  f"lm {cells[5]:>3} Z50 {cells[6]:>6} ratio {cells[7]:>5} shift {cells[8]:<20} lm shift "
                  f"{cells[9]:<20} held {cells[10]}")
    half = len(data) - len(data) // 2
    print(f"\nThe same attacks where only the public half of the papers can be copied ({half} papers; on the "
          f"{len(data) // 2} sealed ones the endpoint serves its own generic review), with the sealed-gap test:")
    if args.markdown:
        print("\n| transformation | strength | public papers caught per paper | information / human, mean "
              "| sealed-gap (information) | sealed-gap (LM) | held (any submission-level test) |")
        print("|---|---|---|---|---|---|---|")
    for row, (mean, gap, zgap, held, caught) in zip(rows, sealed_rows, strict=True):
        cells = (row[0], row[1], f"{caught}/{half}", f"{mean:.2f}",
                 f"{gap.ratio:.2f}x, {format_p(gap.p, gap.public + gap.sealed)}",
                 f"{zgap.ratio:.2f}x, {format_p(zgap.p, zgap.public + zgap.sealed)}", "yes" if held else "no")
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(f"{row[0]:<80} {row[1]:<18} caught {cells[2]:>6} ratio {cells[3]:>5} gap {cells[4]:<20} "
                  f"lm gap {cells[5]:<20} held {cells[6]}")
    print(f"sealed-gap tests: {honest_gap_held}/{draws} honest submissions held (information), "
          f"{honest_gap_z_held}/{draws} (LM statistic), each with a random half of its papers sealed")
    per_review = calibration_requests / max(1, sum(honest_n.values()))
    print(("\n" if args.markdown else "") + "LM copy check: honest reviews flagged " + ", ".join(
        f"{name} {honest_flags[name]}/{honest_n[name]} ({honest_flags[name] / max(1, honest_n[name]):.2%}; bars "
        f"{bars[(name, 0)]:.2f} / {bars[(name, 1)]:.2f}, each calibrated on the other half of the sample's papers)"
        for name in BUNDLED)
          + f"; cost {per_review:.0f} requests per checked review ({calibration_requests} for calibration, "
          f"{calibration_s:.0f} s; {cached.computed} requests computed in all); shift tests: "
          f"{honest_held}/{draws} honest submissions held (information), "
          f"{honest_z_held}/{draws} (LM statistic); {elapsed:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=None,
                        help="transform a seeded sample of N papers of each sample (the lexical and prose "
                             "false-positive rates are always measured on every review)")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/security.md)")
    parser.add_argument("--estimator", default="offline",
                        help="the information view's estimator (offline; hf:smollm2-135m for the SmolLM2 table)")
    parser.add_argument("--no-information", action="store_true", help="lexical detector and prose test only")
    parser.add_argument("--cases", default="",
                        help="only the transformations whose name contains this (comma-separated: any of these)")
    parser.add_argument("--honest-papers", type=int, default=None,
                        help="measure the false positives on a seeded N papers of each sample (default: every review)")
    parser.add_argument("--paraphrase", action="store_true",
                        help="only the paraphrase rows (issue 62): word-level checks, information view, LM copy check "
                             "and the submission-level shift test")
    parser.add_argument("--lm-estimator", default="offline",
                        help="the LM copy check's estimator (offline; hf:smollm2-135m for SmolLM2)")
    parser.add_argument("--info-store", default=None,
                        help="a store file for the information view (its scores and log-prob cache): a stopped run "
                             "resumes where it stopped; the same --papers and --seed only")
    parser.add_argument("--lm-cache", default=None,
                        help="a store file for the LM copy check's log-prob cache: a stopped run resumes where it "
                             "stopped, and benchmarks/lm_copy_false_positives.py --cache shares it")
    parser.add_argument("--paraphrase-lm", default=None,
                        help="with --paraphrase: a local instruction-tuned model's folder (SmolLM2-135M-Instruct: "
                             "<data dir>/models/smollm2-135m) for the rows paraphrased by the local LM")
    parser.add_argument("--data-dir", default=None,
                        help="where the LM is cached (default: a fresh folder; the model is then fetched again)")
    args = parser.parse_args()
    started = time.monotonic()
    background = bundled_background()
    prose_model = bundled_word_order()
    unseen = held_out(args.seed)
    leave_out = frozenset(label for label, _, _ in unseen)
    data = load(args.papers, args.seed, leave_out)
    if args.paraphrase:
        NEIGHBOURS.append(Neighbours([r for _, _, reviews in load(None, args.seed) for r in reviews]))
        view = None if args.no_information else InformationView({label for label, _, _ in data}, args.estimator,
                                                                    Path(args.data_dir or tempfile.mkdtemp()),
                                                                    Path(args.info_store) if args.info_store else None)
        try:
            paraphrase_section(args, data, unseen, background, prose_model, view)
        finally:
            if view is not None:
                view.close()
        return
    everything = load(None, args.seed)
    sketches = SketchIndex(set(leave_out))
    honest = everything if args.honest_papers is None else load(args.honest_papers, args.seed + 1)
    vocab = sorted({w for _, _, reviews in everything for r in reviews for w in r.split() if w.isalpha()})
    view = None if args.no_information else InformationView({label for label, _, _ in data}, args.estimator,
                                                                Path(args.data_dir or tempfile.mkdtemp()),
                                                                Path(args.info_store) if args.info_store else None)

    # lexical and prose false positives: every review of both samples (against the other reviews of its paper; the
    # word model with the review's own counts left out, so that it is as new to it as a candidate's)
    honest_lex = [copy_evidence(text, reviews[:i] + reviews[i + 1:], paper, background)
                  for _, paper, reviews in honest for i, text in enumerate(reviews)]
    honest_prose = []
    for _, _, reviews in honest:
        for text in reviews:
            toks = prose_tokens(text)
            gain = prose_model.gain(toks, toks)
            honest_prose.append(len(toks) - 1 >= MIN_TOKENS and gain < prose_threshold(len(toks) - 1))
    # the sketch index's: every review of both samples against the public reviews of every *other* paper
    honest_sketch = sketches.findings([(label, paper, text) for label, paper, reviews in honest for text in reviews])
    honest_labels = [label for label, _, reviews in honest for _ in reviews]
    sketch_flags = [(label, f) for label, f in zip(honest_labels, honest_sketch, strict=True)
                    if f is not None and f.copied]
    # the information view's: each reference of a sampled paper scored as a candidate against the others
    honest_info: list[bool] = []
    if view is not None:
        items = [(label.split("/", 1)[1], text) for label, _, reviews in data
                 for text in view.refs.get(label.split("/", 1)[1], {}).values() if text]
        honest_info = [r is not None and r >= HUMAN_FACTOR for r in view.ratios(items)]
    honest_any = [lex.copied or prose or (other is not None and other.copied)
                  for lex, prose, other in zip(honest_lex, honest_prose, honest_sketch, strict=True)]
    rows = []
    missed_notes: list[str] = []
    for name, strength, transform, target in CASES:
        if args.cases and not any(part.strip() in name for part in args.cases.split(",") if part.strip()):
            continue
        texts = []
        for k, (label, _, reviews) in enumerate(data):
            rng = random.Random(f"{args.seed}/{label}/{name}/{strength}")
            OTHER_REVIEW[0] = "\n\n".join(data[(k + 1) % len(data)][2])
            UNSEEN_REVIEW[0] = "\n\n".join(unseen[k % len(unseen)][2])
            texts.append(transform(list(reviews), rng, rng.sample(vocab, 400)))
        lex = [copy_evidence(t, reviews, paper, background) for t, (_, paper, reviews) in zip(texts, data, strict=True)]
        prose = [not prose_evidence(t, prose_model).prose for t in texts]
        others = [f is not None and f.copied for f in sketches.findings(
            [(label, paper, t) for t, (label, paper, _) in zip(texts, data, strict=True)])]
        info = [False] * len(texts)
        ratios: list[float | None] = [None] * len(texts)
        if view is not None:
            ratios = view.ratios([(label.split("/", 1)[1], t) for t, (label, _, _) in zip(texts, data, strict=True)])
            info = [r is not None and r >= HUMAN_FACTOR for r in ratios]
        caught = [a.copied or b or c or d for a, b, c, d in zip(lex, prose, info, others, strict=True)]
        missed = [r for r, c in zip(ratios, caught, strict=True) if not c and r is not None]
        if missed:  # what the copies nothing caught carry: their summed share over the human review's (1 = as much)
            missed_notes.append(f"{name}, {strength}: {len(missed)} missed; information over the human review's "
                                f"median {sorted(missed)[len(missed) // 2]:.2f}, largest {max(missed):.2f}, "
                                f"{sum(r > 1 for r in missed)} above 1")
        scores = sorted(e.score for e in lex)
        rows.append((name, strength, sum(caught), len(data), sum(e.copied for e in lex), sum(prose), sum(info),
                     sum(others), scores[len(scores) // 20], target))
    if view is not None:
        view.close()
    elapsed = time.monotonic() - started
    lex_fp, prose_fp, any_fp = sum(e.copied for e in honest_lex), sum(honest_prose), sum(honest_any)
    n = len(honest_lex)
    summary = (f"honest reviews flagged: {any_fp}/{n} ({any_fp / n:.2%}) by the copy check, the prose test or other "
               f"papers' reviews (copy detector {lex_fp}, prose test {prose_fp}, other papers' reviews through the "
               f"sketch index of {sketches.papers} papers {len(sketch_flags)}, "
               f"{sum(f is not None for f in honest_sketch)} compared in full)"
               + (f"; information view ({args.estimator}): {sum(honest_info)}/{len(honest_info)} references scored as "
                  f"candidates against the other references of their paper" if view is not None else "")
               + f"; transformations on {len(data)} papers ({len(unseen)} {HELD_OUT_SAMPLE} papers held out of them "
               f"and of the sketch index: the unseen stand-ins); {elapsed:.0f} s")
    if args.markdown:
        print("| transformation | strength | caught | rate | copy detector | prose test | information view "
              "| other papers' reviews (sketch index) | score, 5th percentile |")
        print("|---|---|---|---|---|---|---|---|---|")
    for name, strength, caught, total, lexical, prose_n, info_n, other_n, p5, target in rows:
        note = "" if target else " (not a target)"
        if args.markdown:
            print(f"| {name} | {strength} | {caught}/{total} | {caught / total:.1%}{note} | {lexical} | {prose_n} | "
                  f"{info_n if view is not None else '-'} | {other_n} | {p5:.2f} |")
        else:
            print(f"{name:<55} {strength:<22} {caught:>4}/{total:<4} {caught / total:7.1%}  lexical {lexical:>4} "
                  f"prose {prose_n:>4} info {info_n if view is not None else '-':>4} other papers {other_n:>4}  "
                  f"p5 {p5:.2f}{note}")
    print(("\n" + summary[0].upper() + summary[1:] + ".") if args.markdown else summary)
    for note in missed_notes:
        print(("\n- " if args.markdown else "missed: ") + note)
    for label, finding in sketch_flags:
        print(("\n- " if args.markdown else "") + f"honest review of {label} flagged through the sketch index: "
              + finding.describe())


if __name__ == "__main__":
    main()
