"""How many judgment lines the rules preprocessor draws from the Summary field of form reviews, by verb.

The Summary field of a review form describes the paper; a line drawn from it is a judgment only where the reviewer
wrote one there.  A line counts as drawn from the summary when the review without its Summary field does not give
it.  Measured for rules-v6 in docs/scoring.md:

    .venv/bin/python scripts/summary_lines.py                      # the bundled ICLR 2026 sample
    .venv/bin/python scripts/summary_lines.py path/to/reviews.jsonl --examples 20
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from importlib import resources
from pathlib import Path

from grebench.ingest._content import review_text
from grebench.scoring import RULES_ID, rules_judgment_lines

DEFAULT = Path(str(resources.files("grebench.ingest") / "data" / "iclr2026_reviews.jsonl"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT, help="a bundled-format JSONL file")
    parser.add_argument("--examples", type=int, default=10, help="lines drawn from summaries to print")
    args = parser.parse_args()
    reviews = total = drawn = 0
    verbs: Counter[str] = Counter()
    examples: list[str] = []
    with args.path.open(encoding="utf-8") as lines:
        for raw in lines:
            for review in json.loads(raw)["reviews"]:
                try:
                    text, sections = review_text(review["content"])
                except ValueError:
                    continue
                if not any(h.lower().startswith("summary") for h, _ in sections):
                    continue
                reviews += 1
                full = rules_judgment_lines(text)
                rest = "\n\n".join(f"{h}:\n{t}" for h, t in sections if not h.lower().startswith("summary"))
                without = set(rules_judgment_lines(rest)) if rest else set()
                extra = [line for line in full if line not in without]
                total += len(full)
                drawn += len(extra)
                verbs.update(line.split()[2] for line in extra)
                examples += extra[: max(0, args.examples - len(examples))]
    share = drawn / total if total else 0.0
    print(f"{args.path.name} ({RULES_ID}): {reviews} reviews with a summary field, {total} lines, {drawn} drawn "
          f"from the summary ({share:.1%}); by verb: {dict(verbs)}")
    for line in examples:
        print("  ", line[:160])
    print(json.dumps({"rules": RULES_ID, "reviews": reviews, "lines": total, "from_summary": drawn,
                      "by_verb": dict(verbs)}))


if __name__ == "__main__":
    main()
