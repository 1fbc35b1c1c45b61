"""The app's Compare tab (issue 63 §4): two rows of the headline board side by side, as the site's compare pages.

The selection is in the URL (``?compare=a,b``): a page load reads it from the request (Gradio hands the handler its
``gr.Request``, whose ``query_params`` are the page URL's), and a change of either dropdown writes it back in the
browser (``history.replaceState``), so a comparison can be linked.  The numbers are the site's: the board's paired test
over the per-paper values its rows are the means of (:func:`grebench.scoring.compare_pair`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grebench.scoring import board_floors, board_paper_scores, compare_pair, format_p, headline_first
from grebench.site import _data
from grebench.site._labels import Labels
from grebench.site._reader import ReaderCache
from grebench.store import BASELINE, CONTESTANT, Store

#: The Compare tab's table of the papers where the two differ most.
HEADERS = ["Paper", "Paper id", "A (nats)", "B (nats)", "A − B"]
#: The browser side of a dropdown change: the pair goes into the page URL's ``compare`` parameter, with
#: ``tab=compare``, when the visitor changed it on the Compare tab (the values pass on unchanged to the Python
#: handler).  Not while the page opens (the load fills the dropdowns, and their change would otherwise rewrite
#: ``?tab=downloads`` into the Compare tab's address) nor while another tab is shown.
URL_JS = """(a, b) => {
  const box = document.querySelector("#compare-a");
  if (window.grebenchTabOpened && box && box.offsetParent !== null && a && b) {
    const url = new URL(window.location.href);
    url.searchParams.set("compare", a + "," + b);
    url.searchParams.set("tab", "compare");
    window.history.replaceState(window.history.state, "", url.toString());
  }
  return [a, b];
}"""


def _headline(store: Store) -> Mapping[str, Any] | None:
    boards = headline_first(_data.boards(store), Labels.load(store).is_proxy)
    return boards[0] if boards else None


def compare_choices(cache: ReaderCache) -> list[str]:
    """What can be compared: the headline board's contestants, the human baseline and the floor controls, in the
    board's order."""
    def compute(store: Store) -> list[str]:
        board = _headline(store)
        if board is None:
            return []
        floors = set(board_floors())
        return [str(r["candidate"]) for r in board["rows"]
                if r.get("role") in (CONTESTANT, BASELINE) or r["candidate"] in floors]

    return list(cache.view("compare-choices", None, compute))


def parse_compare(value: str | None) -> tuple[str | None, str | None]:
    """``?compare=a,b`` as the pair (None where a side is missing)."""
    parts = [p.strip() for p in (value or "").split(",")]
    return (parts[0] or None if parts else None), (parts[1] or None if len(parts) > 1 else None)


def compare_view(cache: ReaderCache, a: str | None, b: str | None) -> tuple[str, list[list[Any]]]:
    """The tab for one pair: the paired test in words and the papers where they differ most (empty without a pair,
    or for a name not on the headline board)."""
    if not a or not b:
        return "Pick two rows of the headline board.", []
    if a == b:
        return "Pick two different rows.", []

    def compute(store: Store) -> tuple[str, list[list[Any]]]:
        board = _headline(store)
        names = {str(r["candidate"]) for r in board["rows"]} if board is not None else set()
        if board is None or a not in names or b not in names:
            return f"No row {a if a not in names else b!r} on the headline board.", []
        c = compare_pair(a, b, board_paper_scores(store, board), samples=int(board.get("bootstrap_samples") or 2000),
                         seed=int(board.get("seed") or 0))
        if not c["papers"]:
            return f"**{a}** and **{b}** share no paper on the headline board.", []
        titles = {p["paper_id"]: p["title"] for p in _data.paper_ids(store)}
        verdict = (f"the board tells them apart: **{a if c['diff'] > 0 else b}** scores higher"
                   if c["distinguishable"] else "the board cannot tell them apart (p ≥ 0.05 on these papers)")
        text = (f"**{a}** vs **{b}** on the headline board ({board.get('venue_label') or board['venue_id']} · "
                f"{board.get('title') or board['metric']}): mean per-paper difference A − B **{c['diff']:+.2f}** nats "
                f"(95% paired-bootstrap CI [{c['ci95_low']:.2f}, {c['ci95_high']:.2f}]) over {c['papers']} papers, "
                f"{format_p(c['p'], c['papers'])} ({c['method']}, the test the board uses against the human "
                f"baseline): {verdict}. {a} scores higher on {c['a_higher']} papers, {b} on {c['b_higher']}. "
                "Both reviews of a paper: the Paper tab (`?tab=paper&paper=ID`).")
        rows = [[str(titles.get(t["paper_id"], t["paper_id"])), t["paper_id"], round(t["a"], 3), round(t["b"], 3),
                 round(t["diff"], 3)] for t in c["top"]]
        return text, rows

    text, rows = cache.view("compare", (a, b), compute)
    return text, [list(r) for r in rows]


def compare_from_query(cache: ReaderCache, request: Any) -> tuple[str | None, str | None]:
    """The pair a page load opens the tab on: ``?compare=a,b`` when both are comparable rows, else the headline
    board's first two rows."""
    choices = compare_choices(cache)
    wanted = parse_compare(str(request.query_params.get("compare", "")) if request is not None else "")
    if wanted[0] in choices and wanted[1] in choices:
        return wanted
    return (choices[0] if choices else None), (choices[1] if len(choices) > 1 else None)
