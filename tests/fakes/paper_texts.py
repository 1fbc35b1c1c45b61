"""Extracted texts of made-up papers, as the PDF worker writes them, and disguised resubmissions of them (issue 62).

A paper is drawn from its own 400 of the words of the bundled ICLR 2020 abstracts (its seed picks them): title,
abstract, numbered sections of paragraphs, figure captions, a reference list and an appendix.  Two seeds are two
different works of one field.
"""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache

from grebench.ingest import bundled_path


@lru_cache(maxsize=1)
def _vocabulary() -> tuple[str, ...]:
    words: set[str] = set()
    for line in bundled_path("iclr2020").read_text(encoding="utf-8").splitlines()[:200]:
        words.update(re.findall(r"[a-z]{4,}", (json.loads(line)["abstract"] or "").lower()))
    return tuple(sorted(words))


class _Words(random.Random):
    """A seeded generator with its paper's own words."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.words = self.sample(_vocabulary(), 400)


def _sentence(rng: _Words, n: int = 18) -> str:
    return " ".join(rng.choice(rng.words) for _ in range(n)).capitalize() + "."


def _reference(rng: _Words) -> str:
    names = ", ".join(f"{rng.choice(rng.words).capitalize()} {rng.choice('ABCDEFGHJKLM')}." for _ in range(3))
    return f"{names} {_sentence(rng, 8)[:-1]}. In {rng.choice(['ICLR', 'NeurIPS', 'ICML'])}, {rng.randint(2012, 2019)}."


def paper_text(seed: int) -> str:
    """The extracted text of made-up paper ``seed``: about 2,600 words of body, 3 captions, 40 references."""
    rng = _Words(seed)
    out = [_sentence(rng, 8)[:-1].upper(), "Anonymous authors Paper under double-blind review",
           "ABSTRACT " + " ".join(_sentence(rng) for _ in range(6))]
    for number in range(1, 6):
        out.append(f"{number} {_sentence(rng, 3)[:-1].upper()}")
        out += [" ".join(_sentence(rng) for _ in range(6)) for _ in range(5)]
        if number <= 3:
            out.append(f"Figure {number}: {_sentence(rng, 20)}")
    out += ["REFERENCES", "\n".join(_reference(rng) for _ in range(40)), "A PROOF OF THE BOUND",
            " ".join(_sentence(rng) for _ in range(6))]
    return "\n\n".join(out)


def disguised(text: str, seed: int, new_opening: bool = False) -> str:
    """A disguised resubmission of ``text``: new title and abstract, a fifth of the paragraphs dropped, two swapped,
    the lines wrapped again; captions and references kept.  ``new_opening``: the first section written anew too
    (what the first pages alone, issue 48, read)."""
    rng = _Words(seed)
    blocks = text.split("\n\n")
    if new_opening:
        blocks[4:9] = [" ".join(_sentence(rng) for _ in range(6)) for _ in range(5)]
    body = [b for b in blocks[3:] if b.startswith(("Figure", "REFERENCES", "A PROOF")) or "\n" in b
            or rng.random() >= 0.2]
    i = rng.randrange(len(body) - 1)
    body[i], body[i + 1] = body[i + 1], body[i]
    wrapped = [re.sub(r"(\S+ \S+ \S+ \S+ \S+ \S+ \S+ \S+ \S+ \S+ \S+) ", r"\1\n", b) if "\n" not in b else b
               for b in body]
    return "\n\n".join([_sentence(rng, 7)[:-1].upper(), "Anonymous authors",
                        "ABSTRACT " + " ".join(_sentence(rng) for _ in range(5)), *wrapped])
