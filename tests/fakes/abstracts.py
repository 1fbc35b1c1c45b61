"""Disguised resubmissions by their title and abstract alone (issue 62 §3): what a resubmitting author does to escape
a word-level comparison, with no PDF to give them away.

Each content word is replaced by a synonym (a thesaurus, else whatever the caller's ``synonym`` source says), the
abstract's sentences are dropped (each with probability ``drop``, two kept at least) and shuffled; terms (a capital or a
digit inside a word, hyphenated compounds) are kept, as a paraphraser keeps them.  With ``rate`` 1 and ``drop`` 0.3
the content-word cosine to the original is 0.14 / 0.27 / 0.43 at the 10th / 50th / 90th percentile on the ICLR 2020
sample with distributional synonyms (``benchmarks/resubmission_links.py --abstracts``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

#: Common words of ML abstracts and a synonym each (a thesaurus a resubmitting author would use).
THESAURUS = {
    "propose": "introduce", "proposed": "introduced", "method": "technique", "methods": "techniques",
    "approach": "strategy", "approaches": "strategies", "results": "findings", "experiments": "evaluations",
    "show": "demonstrate", "shows": "demonstrates", "novel": "new", "model": "system", "models": "systems",
    "performance": "effectiveness", "improve": "enhance", "improves": "enhances", "learning": "training",
    "learn": "acquire", "learned": "acquired", "tasks": "problems", "task": "problem", "data": "examples",
    "framework": "scheme", "paper": "work", "efficiently": "quickly", "efficient": "economical", "small": "limited",
    "amount": "quantity", "knowledge": "information", "challenge": "difficulty", "critical": "key",
    "traditional": "conventional", "current": "existing", "capture": "model", "complex": "intricate",
    "relations": "dependencies", "between": "among", "extensive": "thorough", "demonstrate": "confirm",
    "effectiveness": "usefulness", "quickly": "rapidly", "relevant": "pertinent", "structure": "layout",
    "increases": "raises", "automatically": "without supervision", "extracts": "derives", "constructs": "builds",
    "arrives": "appears", "previous": "earlier", "transfers": "carries over", "handled": "addressed",
    "lack": "miss", "capability": "ability", "design": "engineering", "motivated": "inspired",
    "organization": "arrangement", "bases": "stores", "tailor": "adapt", "addresses": "tackles",
    "interpretability": "transparency", "conduct": "run", "outperforms": "beats", "baselines": "competitors",
    "state": "level", "accuracy": "precision", "networks": "architectures", "network": "architecture",
    "training": "fitting", "neural": "deep", "existing": "prior", "however": "yet", "significantly": "markedly",
}
_FUNCTION = frozenset("""a about after all also an and any are as at be been but by can could did do does each either
for from had has have how however i if in into is it its itself may more most much no nor not of on one only or other
our over should so some such than that the their them then there these they this those through to under very was we
were what when where which while who will with within would yet you your""".split())  # noqa: SIM905
_TOKEN = re.compile(r"^(\W*)([A-Za-z][a-z]{3,})(\W*)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

Synonyms = Callable[[str, random.Random], "str | None"]


def _thesaurus_only(word: str, rng: random.Random) -> str | None:
    return None


def synonymise(text: str, rng: random.Random, rate: float = 1.0, synonym: Synonyms = _thesaurus_only) -> str:
    """Each content word (four letters or more, no capital inside, not a function word) replaced with probability
    ``rate`` by its synonym: the thesaurus's, else ``synonym``'s, else kept."""
    out = []
    for token in text.split():
        m = _TOKEN.match(token)
        if m is None or m.group(2).lower() in _FUNCTION or rng.random() >= rate:
            out.append(token)
            continue
        lead, word, tail = m.groups()
        new = THESAURUS.get(word.lower()) or synonym(word.lower(), rng) or word
        out.append(lead + (new[:1].upper() + new[1:] if word[:1].isupper() else new) + tail)
    return " ".join(out)


def disguised(title: str, abstract: str, rng: random.Random, rate: float = 1.0, drop: float = 0.3,
              synonym: Synonyms = _thesaurus_only) -> tuple[str, str]:
    """(title, abstract) of a disguised resubmission: synonyms for the content words, the abstract's sentences
    dropped (each with probability ``drop``, two kept at least) and shuffled."""
    sentences = [s for s in _SENTENCE.split(" ".join(abstract.split())) if s.strip()]
    kept = [s for s in sentences if rng.random() >= drop]
    if len(kept) < 2:
        kept = sentences[:2]
    rng.shuffle(kept)
    return synonymise(title, rng, 1.0, synonym), " ".join(synonymise(s, rng, rate, synonym) for s in kept)
