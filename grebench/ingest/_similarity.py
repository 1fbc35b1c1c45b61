"""The similarity rule between two papers' metadata: title, abstract, first pages of the text, authors and keywords
(issues 31 and 48); what :mod:`grebench.ingest._links` compares each candidate pair with.

A resubmission keeps most of its abstract and usually its title (lightly edited, sometimes replaced).  Two papers
are linked when their normalised titles are equal (and the abstracts do not disagree), when the titles are close and
the abstracts similar, or when the abstracts alone are nearly the same; and (issue 48) when the title is new and
the abstract rewritten but still shares about half its content words (:data:`ABSTRACT_CORROBORATED`) and something
else public says it is the same work: the first pages of the extracted text, two authors, or the keywords
(:func:`corroboration`); or when the first pages alone are nearly the same (:data:`BODY_ALONE`).  Thresholds
(:data:`TITLE_MIN`, :data:`ABSTRACT_WITH_TITLE`, :data:`ABSTRACT_ALONE`, :data:`ABSTRACT_SAME_TITLE`,
:data:`ABSTRACT_CORROBORATED`) were calibrated on the bundled ICLR 2020 and 2026 samples (docs/security.md,
"Resubmissions").
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property, lru_cache

from grebench.store import Link, Store

TITLE_MIN = 0.80            # title similarity (SequenceMatcher ratio of normalised titles) for a title+abstract link
ABSTRACT_WITH_TITLE = 0.50  # abstract similarity (cosine of content words) needed with such a title
ABSTRACT_SAME_TITLE = 0.30  # an identical normalised title, unless the abstracts clearly differ
ABSTRACT_ALONE = 0.75       # a new title, the abstract nearly unchanged
# a new title and a rewritten abstract (issue 48: the abstract still shares half its content words) is the same work
# when something else says so: the paper's own text (its first pages), two or more authors, or its keywords
ABSTRACT_CORROBORATED = 0.45
BODY_WITH_ABSTRACT = 0.50   # cosine of the first pages' content words, with such an abstract
BODY_ALONE = 0.75           # the first pages nearly unchanged, whatever the title and abstract
SHARED_AUTHORS = 2          # normalised author names in common
KEYWORDS_MIN = 0.6          # rarity-weighted Jaccard of the keywords' words (ICLR 2020: different works <= 0.41)
KEYWORD_WORDS = 2           # keyword words that must be shared
BODY_CHARS = 6000           # the first pages: the introduction of a paper's extracted text
_WORD = re.compile(r"\w+")
_STOP = frozenset("""
a about above after again against all also among an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having here
how however i if in into is it its itself just more most much no nor not of off on once only or other our ours
out over own same should so some such than that the their them then there these they this those through to too
under until up very via was we were what when where which while who whom why will with would yet you your
paper propose proposed show shows method methods approach results
""".split())  # noqa: SIM905 (a word list reads best as text)


def normalise_title(title: str | None) -> str:
    """Title compared: NFKC, case-folded, punctuation as spaces, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", title or "").casefold()
    return " ".join(_WORD.findall(text.replace("_", " ")))


def content_words(text: str | None) -> list[str]:
    """Words of a text that say what it is about: NFKC, case-folded, two letters or more, not a stop word."""
    words = _WORD.findall(unicodedata.normalize("NFKC", text or "").casefold())
    return [w for w in words if len(w) > 2 and w not in _STOP and not w.isdigit()]


def title_similarity(a: str | None, b: str | None) -> float:
    """Similarity of two titles in [0, 1]: difflib's ratio of the normalised titles."""
    na, nb = normalise_title(a), normalise_title(b)
    if not na or not nb:
        return 0.0
    return SequenceMatcher(None, na, nb, autojunk=False).ratio()


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    if not a or not b:
        return 0.0
    dot = sum(n * b[w] for w, n in a.items() if w in b)
    return dot / math.sqrt(sum(n * n for n in a.values()) * sum(n * n for n in b.values()))


def abstract_similarity(a: str | None, b: str | None) -> float:
    """Cosine similarity of the content-word counts of two abstracts (0 when either is missing)."""
    return _cosine(Counter(content_words(a)), Counter(content_words(b)))


@dataclass(frozen=True)
class PaperText:
    """What linking reads of a paper: its title and abstract, and where public its authors, keywords and the first
    pages of its extracted text, normalised once."""

    paper_id: str
    title: str
    abstract: str | None
    authors: str | None = None
    keywords: str | None = None
    body: str | None = None

    @cached_property
    def norm_title(self) -> str:
        """:func:`normalise_title` of the title."""
        return normalise_title(self.title)

    @cached_property
    def words(self) -> Counter[str] | None:
        """Content-word counts of the abstract; None without one."""
        return Counter(content_words(self.abstract)) if self.abstract and self.abstract.strip() else None

    @cached_property
    def body_words(self) -> Counter[str] | None:
        """Content-word counts of the first :data:`BODY_CHARS` characters of the extracted text; None without."""
        return Counter(content_words(self.body[:BODY_CHARS])) if self.body and self.body.strip() else None

    @cached_property
    def author_names(self) -> frozenset[str]:
        """Authors as compared: each name normalised like a title (NFKC, case-folded, punctuation as spaces)."""
        return frozenset(n for n in (normalise_title(a) for a in re.split(r"[|;,]", self.authors or "")) if n)

    @cached_property
    def keyword_words(self) -> frozenset[str]:
        """The keywords' content words, crudely stemmed (a trailing s dropped): ``meta-learning`` and ``meta
        learning`` agree."""
        return frozenset(w[:-1] if w.endswith("s") and len(w) > 4 else w for w in content_words(self.keywords))


@dataclass(frozen=True)
class KeywordRarity:
    """How many of the store's papers with keywords use each keyword word: a shared rare keyword word says more than
    a shared "learning"."""

    papers: int
    df: dict[str, int]

    def weight(self, word: str) -> float:
        """``log((papers + 1) / (df + 1))``."""
        return math.log((self.papers + 1) / (self.df.get(word, 0) + 1))


@lru_cache(maxsize=1)
def _bundled_keywords() -> tuple[int, tuple[tuple[str, int], ...]]:
    """Keyword-word document frequency over the bundled samples' papers with keywords (ICLR 2020: 368)."""
    from grebench.ingest._archive import BUNDLED, bundled_source

    df: Counter[str] = Counter()
    papers = 0
    for name in BUNDLED:
        for paper in bundled_source(name).fetch():
            words = PaperText("", "", None, keywords=getattr(paper, "keywords", None)).keyword_words
            papers += bool(words)
            df.update(words)
    return papers, tuple(df.items())


def keyword_rarity(store: Store) -> KeywordRarity:
    """The keyword words' document frequency over the bundled samples' papers and the store's (a store of a few
    papers still tells "learning" from "heterogeneity")."""
    papers, bundled = _bundled_keywords()
    df: Counter[str] = Counter(dict(bundled))
    rows = store.rows("SELECT keywords FROM papers WHERE keywords IS NOT NULL AND trim(keywords) <> ''")
    for row in rows:
        df.update(PaperText("", "", None, keywords=row["keywords"]).keyword_words)
    return KeywordRarity(papers + len(rows), dict(df))


def corroboration(a: PaperText, b: PaperText, rarity: KeywordRarity | None = None) -> str | None:
    """What besides title and abstract says two papers are one work: ``text`` (first pages), ``authors`` or
    ``keywords`` (weighted by ``rarity``; not read without it); None when nothing public does."""
    if a.body_words is not None and b.body_words is not None and _cosine(a.body_words, b.body_words) \
            >= BODY_WITH_ABSTRACT:
        return "text"
    if len(a.author_names & b.author_names) >= SHARED_AUTHORS:
        return "authors"
    shared, every = a.keyword_words & b.keyword_words, a.keyword_words | b.keyword_words
    if rarity is not None and len(shared) >= KEYWORD_WORDS and \
            sum(map(rarity.weight, shared)) >= KEYWORDS_MIN * sum(map(rarity.weight, every)):
        return "keywords"
    return None


def match(a: PaperText, b: PaperText, rarity: KeywordRarity | None = None) -> Link | None:
    """The link between two papers if they are versions of the same work by this module's rule.

    The abstracts are compared first (cheap on counted words); the titles' edit ratio only where it can decide; the
    first pages, authors and keywords when title and abstract alone do not (a retitled paper with a rewritten
    abstract).
    """
    abstract = _cosine(a.words, b.words) if a.words is not None and b.words is not None else None
    same_title = bool(a.norm_title) and a.norm_title == b.norm_title
    method = None
    if same_title and (abstract is None or abstract >= ABSTRACT_SAME_TITLE):
        method = "title"
    elif abstract is not None and abstract >= ABSTRACT_ALONE:
        method = "abstract"
    elif abstract is not None and abstract >= ABSTRACT_WITH_TITLE and title_similarity(a.title, b.title) >= TITLE_MIN:
        method = "title+abstract"
    elif a.body_words is not None and b.body_words is not None and _cosine(a.body_words, b.body_words) >= BODY_ALONE:
        method = "text"
    elif abstract is not None and abstract >= ABSTRACT_CORROBORATED and \
            (found := corroboration(a, b, rarity)) is not None:
        method = f"abstract+{found}"
    if method is None:
        return None
    title = 1.0 if same_title else title_similarity(a.title, b.title)
    if method == "abstract" and title >= TITLE_MIN:
        method = "title+abstract"
    return Link(a.paper_id, b.paper_id, method, round(title, 4), None if abstract is None else round(abstract, 4))
