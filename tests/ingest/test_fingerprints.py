"""Issue 62: resubmissions linked by what a disguise does not rewrite cheaply: the body, captions and references of
the extracted text (MinHash fingerprints, LSH keys in the store), and possible links flagged with their reason."""

from __future__ import annotations

from datetime import datetime

from grebench.ingest._evidence import assess
from grebench.ingest._fingerprints import fingerprint_candidates, fingerprints, refresh_fingerprints, split_text
from grebench.ingest._links import find_evidence
from grebench.ingest._similarity import PaperText
from grebench.store import Link, LinkFlag, open_store
from tests.fakes.paper_texts import disguised, paper_text


def test_split_text_finds_captions_references_and_the_appendix() -> None:
    text = paper_text(1)
    parts = split_text(text)
    assert "Figure 1:" in parts.captions and "Figure 1:" not in parts.body
    assert "REFERENCES" not in parts.body and parts.references.count(", 20") >= 30
    assert "A PROOF OF THE BOUND" in parts.body  # the appendix after the references counts as body


def test_a_disguised_resubmission_is_linked_by_its_text_and_distinct_papers_are_not() -> None:
    """Title and abstract replaced (the rule of issue 48 finds nothing), a fifth of the paragraphs dropped, the
    rest kept: linked by the body.  Two different papers of the same vocabulary: nothing."""
    earlier, other = paper_text(1), paper_text(2)
    resubmission = disguised(earlier, seed=3)
    a = PaperText("a", "Routing Tokens to Memory Slots", "We route tokens to slots for long documents.")
    b = PaperText("b", "Budgeted Attention Without Quadratic Cost", "A cheaper attention that keeps accuracy.")
    assert assess(a, b) is None  # title and abstract alone: no link
    found = assess(a, b, prints=(fingerprints(earlier), fingerprints(resubmission)))
    assert isinstance(found, Link) and found.method == "text:body", found
    assert assess(a, b, prints=(fingerprints(earlier), fingerprints(other))) is None


def test_kept_references_alone_flag_a_possible_link_with_its_reason() -> None:
    """A new body and 45 % of the earlier reference list: above the "possible" bar, below the link bar; the flag
    says which evidence and how strong."""
    earlier = paper_text(1)
    refs = split_text(earlier).references.split("\n")
    kept = [r for i, r in enumerate(refs) if i % 20 < 9]
    resubmission = paper_text(7).split("REFERENCES")[0] + "REFERENCES\n" + "\n".join(kept)
    found = assess(PaperText("a", "One", None), PaperText("b", "Two", None),
                   prints=(fingerprints(earlier), fingerprints(resubmission)))
    assert isinstance(found, LinkFlag), found
    assert found.reason.startswith("references text Jaccard 0.") and "possible >= 0.3" in found.reason
    assert 0.3 <= float(found.evidence["references"] or 0) < 0.5


def test_fingerprints_are_stored_once_and_lsh_keys_find_the_pair() -> None:
    store = open_store(None)
    now = datetime(2026, 1, 1)
    texts = {"early": paper_text(1), "late": disguised(paper_text(1), seed=4), "other": paper_text(2)}
    abstracts = {"early": "We route tokens to memory slots for long documents.",
                 "late": "Attention whose cost is linear in the input length, by sending tokens to slots.",
                 "other": "A benchmark of protein folding models under distribution shift."}
    for pid, text in texts.items():
        store.con.execute("INSERT INTO papers (paper_id, venue_id, title, abstract, source, content_sha256, "
                          "ingested_at, updated_at, reviews_public_at) VALUES (?, 'V', ?, ?, 'test', ?, ?, ?, ?)",
                          [pid, f"Paper {pid}", abstracts[pid], pid, now, now,
                           now if pid == "early" else None])
        store.con.execute("INSERT INTO paper_texts (paper_id, pdf_ref, text, status, extracted_at) "
                          "VALUES (?, ?, ?, 'ok', ?)", [pid, f"pdf:{pid}", text, now])
    assert refresh_fingerprints(store, limit=2) == 2 and refresh_fingerprints(store) == 1
    assert refresh_fingerprints(store) == 0
    assert ("late", "early") in fingerprint_candidates(store, {"late"})
    assert not {("late", "other"), ("other", "early")} & set(fingerprint_candidates(store, None))
    links, flags = find_evidence(store, {"late"})
    # the first pages' words (issue 48) or the body's fingerprint: linked either way, "other" neither linked nor flagged
    assert [(x.paper_id, x.linked_id) for x in links] == [("late", "early")] and not flags
    assert links[0].method in ("text", "text:body")
    store.con.execute("UPDATE paper_texts SET extracted_at = ? WHERE paper_id = 'late'", [datetime(2026, 2, 1)])
    assert refresh_fingerprints(store) == 1  # extracted again: fingerprinted again
