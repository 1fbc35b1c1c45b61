"""Finding versions of the same work across venues and years: title, abstract, text, authors and keywords, blocked by
rare words.

A resubmission keeps most of its abstract and usually its title (lightly edited, sometimes replaced).  Two papers
are linked when their normalised titles are equal (and the abstracts do not disagree), when the titles are close and
the abstracts similar, or when the abstracts alone are nearly the same; and (issue 48) when the title is new and
the abstract rewritten but still shares about half its content words (:data:`ABSTRACT_CORROBORATED`) and something
else public says it is the same work: the first pages of the extracted text, two authors, or the keywords
(:func:`corroboration`); or when the first pages alone are nearly the same (:data:`BODY_ALONE`).  Thresholds
(:data:`TITLE_MIN`, :data:`ABSTRACT_WITH_TITLE`, :data:`ABSTRACT_ALONE`, :data:`ABSTRACT_SAME_TITLE`,
:data:`ABSTRACT_CORROBORATED`) were calibrated on the bundled ICLR 2020 and 2026 samples (docs/security.md,
"Resubmissions").

A title and an abstract are cheap to rewrite (issue 62: rewritten to a similarity of 0.14-0.41, 0 of 5 linked).
Where a paper's extracted text is at hand, the body, the captions and the reference list are compared through
MinHash fingerprints (:mod:`grebench.ingest._fingerprints`): a body Jaccard of :data:`BODY_LINK`, or a reference
list of :data:`REFERENCES_LINK` (:data:`REFERENCES_WITH_BODY` with some body in common), links.  Evidence above a
lower bar (:data:`BODY_POSSIBLE`, :data:`REFERENCES_POSSIBLE`, :data:`CAPTIONS_POSSIBLE`, or two shared authors
with a keyword, abstract or title likeness, :func:`possible_reason`) does not link but flags the pair
(:class:`grebench.store.LinkFlag`): until the operator decides (``grebench links --decide``) the pair counts as
linked, so the paper's generations are not sealed and the copy check reads the other paper's reviews.  The bars
were calibrated on the ICLR 2020 sample (distinct works) and on disguised resubmissions built from the staged PDFs
(``benchmarks/resubmission_links.py --disguise``).

Comparing every pair of a 20,000-paper season is 2*10^8 comparisons of long texts; instead the candidates of a paper
are the papers sharing at least :data:`MIN_SHARED` of its rare words (a word in at most :data:`MAX_DF_SHARE` of the
papers), found by a join in the store (an inverted index), and only the best :data:`MAX_CANDIDATES` of those are
compared in full; the papers sharing a fingerprint's locality-sensitive-hashing key are added to them.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property, lru_cache
from typing import TypedDict

from grebench.ingest._fingerprints import Fingerprint, fingerprint_candidates, load_fingerprints, refresh_fingerprints
from grebench.store import EXPLICIT, Link, LinkFlag, Store, put_flags, put_links, utcnow

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
# MinHash Jaccard of the extracted text's parts (issue 62).  Distinct works: body 0.00, captions 0.00, references at
# most 0.04 among the 8 staged PDFs (0.20 when 10 references of one were added to the other); disguised
# resubmissions (title and abstract replaced, 30 % of paragraphs dropped, half the sentences rewritten, 30 % of the
# references dropped): body >= 0.20, references >= 0.40 (docs/security.md, "Resubmissions by their text")
BODY_LINK = 0.15
REFERENCES_LINK = 0.50
REFERENCES_WITH_BODY = 0.35  # with a body Jaccard of at least BODY_POSSIBLE
BODY_POSSIBLE = 0.05
REFERENCES_POSSIBLE = 0.30
CAPTIONS_POSSIBLE = 0.25
# two shared authors are common between distinct works of one venue (ICLR 2020: 48 of 79,800 pairs); with a
# likeness of keywords, abstract or title they flag (ICLR 2020: 1 of 79,800 pairs; an abstract bar of 0.25 would
# flag 5).  Authors are public only once a venue publishes them: a submission under review has none.
AUTHORS_KEYWORDS_POSSIBLE = 0.45
AUTHORS_ABSTRACT_POSSIBLE = 0.30
AUTHORS_TITLE_POSSIBLE = 0.60
MIN_SHARED = 3              # rare words two papers must share to be compared
MAX_DF_SHARE = 0.01         # a word in more than this share of the papers (and more than MIN_DF) is not a key
MIN_DF = 20
MAX_CANDIDATES = 20         # papers compared in full per paper

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


@dataclass(frozen=True)
class Evidence:
    """What two papers have in common: title and abstract similarity, the MinHash Jaccard of each part of their
    extracted texts (None where either lacks it), shared authors and the keywords' weighted Jaccard."""

    title: float
    abstract: float | None
    body: float | None = None
    captions: float | None = None
    references: float | None = None
    authors: int = 0
    keywords: float | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        """The evidence rounded, as stored with a flag."""
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in vars(self).items()}


def keyword_likeness(a: PaperText, b: PaperText, rarity: KeywordRarity | None) -> float | None:
    """Rarity-weighted Jaccard of two papers' keyword words; None without keywords on both or without rarity."""
    every = a.keyword_words | b.keyword_words
    if rarity is None or not a.keyword_words or not b.keyword_words:
        return None
    return sum(map(rarity.weight, a.keyword_words & b.keyword_words)) / (sum(map(rarity.weight, every)) or 1.0)


def evidence(a: PaperText, b: PaperText, rarity: KeywordRarity | None = None,
             prints: tuple[dict[str, Fingerprint], dict[str, Fingerprint]] = ({}, {})) -> Evidence:
    """Every similarity :func:`assess` reads."""
    def part(name: str) -> float | None:
        x, y = prints[0].get(name), prints[1].get(name)
        return None if x is None or y is None else x.jaccard(y)

    abstract = _cosine(a.words, b.words) if a.words is not None and b.words is not None else None
    title = 1.0 if a.norm_title and a.norm_title == b.norm_title else title_similarity(a.title, b.title)
    return Evidence(title, abstract, part("body"), part("captions"), part("references"),
                    len(a.author_names & b.author_names), keyword_likeness(a, b, rarity))


def text_link_method(e: Evidence) -> str | None:
    """``text:body`` or ``text:references`` when the fingerprints link the pair, else None."""
    if e.body is not None and e.body >= BODY_LINK:
        return "text:body"
    if e.references is not None and (e.references >= REFERENCES_LINK or (
            e.references >= REFERENCES_WITH_BODY and (e.body or 0.0) >= BODY_POSSIBLE)):
        return "text:references"
    return None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def possible_reason(e: Evidence) -> str | None:
    """Why a pair below the link bars may still be one work, in words for the operator; None when nothing says so."""
    found = []
    for name, value, bar in (("body", e.body, BODY_POSSIBLE), ("references", e.references, REFERENCES_POSSIBLE),
                             ("captions", e.captions, CAPTIONS_POSSIBLE)):
        if value is not None and value >= bar:
            found.append(f"{name} text Jaccard {value:.3f} (possible >= {bar}, link >= "
                         f"{BODY_LINK if name == 'body' else REFERENCES_LINK if name == 'references' else 'n/a'})")
    if e.authors >= SHARED_AUTHORS:
        likeness = [f"{name} {value:.2f} >= {bar}" for name, value, bar in (
            ("keywords", e.keywords, AUTHORS_KEYWORDS_POSSIBLE), ("abstract", e.abstract, AUTHORS_ABSTRACT_POSSIBLE),
            ("title", e.title, AUTHORS_TITLE_POSSIBLE)) if value is not None and value >= bar]
        if likeness:
            found.append(f"{e.authors} shared authors with {', '.join(likeness)}")
    if not found:
        return None
    return (f"{'; '.join(found)} [title {_fmt(e.title)}, abstract {_fmt(e.abstract)}, body {_fmt(e.body)}, "
            f"references {_fmt(e.references)}, captions {_fmt(e.captions)}, authors {e.authors}, "
            f"keywords {_fmt(e.keywords)}]")


def assess(a: PaperText, b: PaperText, rarity: KeywordRarity | None = None,
           prints: tuple[dict[str, Fingerprint], dict[str, Fingerprint]] = ({}, {})) -> Link | LinkFlag | None:
    """The link between two papers if they are versions of one work by this module's rule; a flag if they might
    be; None when nothing says so.

    Title and abstract first (:func:`match`), then the fingerprints of the extracted texts (``prints``: each
    paper's parts), then the "possible" bars.
    """
    link = match(a, b, rarity)
    if link is not None:
        return link
    e = evidence(a, b, rarity, prints)
    method = text_link_method(e)
    if method is not None:
        return Link(a.paper_id, b.paper_id, method, round(e.title, 4),
                    None if e.abstract is None else round(e.abstract, 4))
    reason = possible_reason(e)
    return None if reason is None else LinkFlag(a.paper_id, b.paper_id, reason, e.as_dict())


def _candidates(store: Store, paper_ids: Collection[str] | None) -> list[tuple[str, str]]:
    """Pairs (paper, candidate) sharing at least MIN_SHARED rare words, the best MAX_CANDIDATES per paper.

    The word index is built in the store (one row per paper and distinct word) and joined on itself restricted to
    rare words: linear in the papers' words, never a comparison of every pair.
    """
    con = store.con
    papers = int(store.scalar("SELECT count(*) FROM papers") or 0)
    max_df = max(MIN_DF, int(papers * MAX_DF_SHARE))
    con.execute("CREATE OR REPLACE TEMP TABLE _link_words AS SELECT DISTINCT paper_id, w FROM ("
                "SELECT p.paper_id, unnest(regexp_split_to_array(lower(p.title || ' ' || coalesce(p.abstract, '') "
                "|| ' ' || coalesce(p.keywords, '') || ' ' || coalesce(p.authors, '') || ' ' "
                "|| coalesce(left(t.text, ?), '')), '[^[:alnum:]]+')) AS w "
                "FROM papers p LEFT JOIN paper_texts t ON t.paper_id = p.paper_id AND t.status = 'ok') "
                "WHERE length(w) > 3", [BODY_CHARS])
    con.execute("CREATE OR REPLACE TEMP TABLE _link_keys AS SELECT w.paper_id, w.w FROM _link_words w "
                "JOIN (SELECT w FROM _link_words GROUP BY w HAVING count(*) <= ?) k USING (w)", [max_df])
    want = "" if paper_ids is None else "WHERE a.paper_id IN (SELECT unnest(?::VARCHAR[]))"
    rows = con.execute(
        f"""SELECT paper_id, other FROM (
                SELECT a.paper_id, b.paper_id AS other, count(*) AS shared,
                       row_number() OVER (PARTITION BY a.paper_id ORDER BY count(*) DESC, b.paper_id) AS k
                FROM _link_keys a JOIN _link_keys b ON a.w = b.w AND a.paper_id <> b.paper_id {want}
                GROUP BY a.paper_id, b.paper_id HAVING count(*) >= ?)
            WHERE k <= ? ORDER BY paper_id, other""",
        ([sorted(paper_ids)] if paper_ids is not None else []) + [MIN_SHARED, MAX_CANDIDATES]).fetchall()
    con.execute("DROP TABLE IF EXISTS _link_words")
    con.execute("DROP TABLE IF EXISTS _link_keys")
    return [(a, b) for a, b in rows]


def find_evidence(store: Store, paper_ids: Collection[str] | None = None) -> tuple[list[Link], list[LinkFlag]]:
    """Links and possible links by similarity between these papers (all when None) and every stored paper.

    The extracted texts not fingerprinted yet are fingerprinted first (every stored paper's: a store from before the
    fingerprints is caught up once); the candidates are the rare-word index's and the fingerprint keys'.
    """
    refresh_fingerprints(store)
    pairs = sorted(set(_candidates(store, paper_ids)) | set(fingerprint_candidates(store, paper_ids)))
    ids = sorted({x for pair in pairs for x in pair})
    rows = store.rows(
        "SELECT p.paper_id, p.title, p.abstract, p.authors, p.keywords, p.reviews_public_at, left(t.text, ?) AS body "
        "FROM papers p LEFT JOIN paper_texts t ON t.paper_id = p.paper_id AND t.status = 'ok' "
        "WHERE p.paper_id IN (SELECT unnest(?::VARCHAR[]))", [BODY_CHARS, ids])
    texts = {r["paper_id"]: PaperText(r["paper_id"], r["title"], r["abstract"], r["authors"], r["keywords"],
                                      r["body"]) for r in rows}
    public = {r["paper_id"]: r["reviews_public_at"] for r in rows}
    prints = load_fingerprints(store, ids)
    rarity = keyword_rarity(store)
    seen: set[tuple[str, str]] = set()
    links: list[Link] = []
    flags: list[LinkFlag] = []
    for a, b in pairs:
        key = (min(a, b), max(a, b))
        if key in seen or a not in texts or b not in texts:
            continue
        seen.add(key)
        found = assess(texts[a], texts[b], rarity, (prints.get(a, {}), prints.get(b, {})))
        if isinstance(found, Link):
            links.append(found)
        elif found is not None and (public[a] is None or public[a] != public[b]):
            # a flag only matters where it could move a paper's public-since date: two papers whose reviews came
            # out together (one venue's round) are not flagged
            flags.append(found)
    return links, flags


def find_links(store: Store, paper_ids: Collection[str] | None = None) -> list[Link]:
    """Links by similarity between these papers (all when None) and every stored paper (:func:`find_evidence`)."""
    return find_evidence(store, paper_ids)[0]


def explicit_links(pairs: Iterable[tuple[str, str]]) -> list[Link]:
    """Links the source named (paper id, earlier version id)."""
    return [Link(a, b, EXPLICIT) for a, b in pairs if a and b and a != b]


#: What a paper's links were computed from: its metadata and, since links read the paper's text (issue 48), the PDF
#: whose text was extracted: a text extracted after the paper was linked (a rerun after a crash, a PDF that failed
#: before) makes its links be computed again, so the links do not depend on the order things arrived in.
_CHECK_KEY = ("p.content_sha256 || CASE WHEN t.status = 'ok' THEN '+text:' || coalesce(t.pdf_sha256, t.pdf_ref) "
              "ELSE '' END")


def unchecked_paper_ids(store: Store) -> set[str]:
    """Papers whose current version was never compared with the store (new, changed, or ingested by a run that
    stopped before linking)."""
    return {r["paper_id"] for r in store.rows(
        f"SELECT p.paper_id FROM papers p LEFT JOIN paper_link_checks c ON c.paper_id = p.paper_id "
        f"LEFT JOIN paper_texts t ON t.paper_id = p.paper_id WHERE c.content_sha256 IS DISTINCT FROM {_CHECK_KEY}")}


class LinkCounts(TypedDict, total=False):
    """The similarity links recomputed for some papers (:func:`link_papers`); an ingest that linked none: no key."""

    papers: int
    links: int
    by_method: dict[str, int]
    links_total: int
    flagged: int            # new possible links (issue 62): held unsealed until decided
    flagged_undecided: int  # every undecided possible link in the store


def link_papers(store: Store, paper_ids: Collection[str] | None = None,
                explicit: Iterable[tuple[str, str]] = ()) -> LinkCounts:
    """Recompute the similarity links and possible links of these papers (all when None) against every stored
    paper, add the explicit ones, and unseal what the links show was public, or may have been; one transaction.
    The summary: links by method, flags."""
    named = explicit_links(explicit)
    with store.transaction():
        found, flags = find_evidence(store, paper_ids) if paper_ids is None or paper_ids else ([], [])
        replace = set(paper_ids) if paper_ids is not None else {r["paper_id"] for r in store.rows(
            "SELECT paper_id FROM papers")}
        written = put_links(store, [*found, *named], replace_computed_of=replace)
        flagged = put_flags(store, flags, replace_of=replace)
        store.con.execute(f"INSERT OR REPLACE INTO paper_link_checks SELECT p.paper_id, {_CHECK_KEY}, ? FROM papers p "
                          "LEFT JOIN paper_texts t ON t.paper_id = p.paper_id "
                          "WHERE p.paper_id IN (SELECT unnest(?::VARCHAR[]))", [utcnow(), sorted(replace)])
    by_method = Counter(link.method for link in [*found, *named])
    return {"papers": len(replace), "links": written, "by_method": dict(sorted(by_method.items())),
            "links_total": int(store.scalar("SELECT count(*) FROM paper_links") or 0), "flagged": flagged,
            "flagged_undecided": int(store.scalar("SELECT count(*) FROM paper_link_flags WHERE decision IS NULL") or 0)}
