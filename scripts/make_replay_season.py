"""Build the shipped replay season (``season:bundled``) from the bundled ICLR 2026 sample; deterministic.

    python scripts/make_replay_season.py [N_PAPERS]

Every tenth paper of ``grebench/ingest/data/iclr2026_reviews.jsonl`` (30 by default), as a season file
(docs/replay.md): ``submitted_at`` = the note's ``cdate`` (kept from the sample), ``reviews_public_at`` = 2025-11-12
(ICLR 2026's release of the reviews), each review's ``modified_at`` = its ``tmdate`` and ``visible_at`` = the
release day.  The sample holds one version of each review (the latest the tracker stored), so the season has no
edit history: a review shows its last text from the release day on.  No text is changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "grebench" / "ingest" / "data"
RELEASE = "2025-11-12"


def main(n_papers: int = 30) -> None:
    # split on newlines only: review texts hold U+2028, which splitlines() would split on
    lines = (DATA / "iclr2026_reviews.jsonl").read_text(encoding="utf-8").split("\n")
    picked = [json.loads(line) for line in lines[::10][:n_papers] if line.strip()]
    out = [json.dumps({"_meta": {"venue_id": "ICLR.cc/2026/Conference", "venue": "ICLR 2026",
                                 "reviews_public_at": RELEASE}})]
    for paper in picked:
        paper.pop("reviews_public_at", None)  # the _meta line's
        for review in paper["reviews"]:
            review["visible_at"] = RELEASE
        out.append(json.dumps(paper, ensure_ascii=False, sort_keys=True))
    (DATA / "iclr2026_season.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
