"""Evidence a disguise does not rewrite cheaply, and the rule on it (issue 62 §3): the MinHash fingerprints of the
extracted text's body, captions and references, and authors with keywords, abstract or title.

:func:`assess` runs the metadata rule first (:func:`grebench.ingest._similarity.match`), then the fingerprints: a
body Jaccard of :data:`BODY_LINK`, or a reference list of :data:`REFERENCES_LINK` (:data:`REFERENCES_WITH_BODY`
with some body in common), links.  Evidence above a lower bar (:data:`BODY_POSSIBLE`, :data:`REFERENCES_POSSIBLE`,
:data:`CAPTIONS_POSSIBLE`, or two shared authors with a keyword, abstract or title likeness, :func:`possible_reason`)
does not link but flags the pair (:class:`grebench.store.LinkFlag`), with the reason in words for the operator.
"""

from __future__ import annotations

from dataclasses import dataclass

from grebench.ingest._fingerprints import Fingerprint
from grebench.ingest._similarity import SHARED_AUTHORS, KeywordRarity, PaperText, _cosine, match, title_similarity
from grebench.store import Link, LinkFlag

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
    return f"{'; '.join(found)} {evidence_words(e)}"


def evidence_words(e: Evidence) -> str:
    """Every similarity of a pair in brackets, as a flag's reason ends."""
    return (f"[title {_fmt(e.title)}, abstract {_fmt(e.abstract)}, body {_fmt(e.body)}, "
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
