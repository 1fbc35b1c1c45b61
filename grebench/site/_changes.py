"""What changed between two board versions, and why: a pure function of two published versions.

A version is ``{"version_id", "boards", "basis"}``: ``boards`` as in ``leaderboard.json``, ``basis`` what they
stood on (:func:`grebench.site._versions.board_basis`: each venue's board papers, each reference review's paper and
version, each board's bootstrap settings).  The causes a row can move for are the ones the issue names: papers that
entered, new reference reviews, edited reviews, new candidates, a changed setup (another estimator or preprocessor
for the same venue and metric, or other bootstrap settings).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict

#: Rows and reasons listed per change text before "... and N more".
SHOWN = 12


class NewReference(TypedDict):
    """A reference review that is new on a venue's board papers."""

    review_id: str
    paper_id: str


class EditedReview(TypedDict):
    """A reference review whose latest version changed."""

    review_id: str
    paper_id: str
    from_version: int
    to_version: int


class _VenueCauses(TypedDict):
    """What changed under one venue's boards (:func:`_venue_causes`)."""

    papers_entered: list[str]
    papers_left: list[str]
    new_references: list[NewReference]
    edited_reviews: list[EditedReview]


class RowChange(TypedDict):
    """One row that entered, left, moved or was rescored: its rank and score before and after, and why."""

    board: str
    candidate: str
    change: str
    rank: list[int | None]
    score: list[float | None]
    why: list[str]


#: What changed from one version to the next (:func:`version_changes`; ``from`` is a keyword, hence the functional
#: form).  The first version has only ``boards`` and ``rows_total`` after ``first``; a later one the rest.
VersionChanges = TypedDict("VersionChanges", {
    "from": str | None, "to": str, "first": bool, "boards": NotRequired[int], "rows_total": NotRequired[int],
    "papers_entered": NotRequired[dict[str, list[str]]], "papers_left": NotRequired[dict[str, list[str]]],
    "new_references": NotRequired[list[NewReference]], "edited_reviews": NotRequired[list[EditedReview]],
    "candidates_entered": NotRequired[list[str]], "candidates_left": NotRequired[list[str]],
    "setups_added": NotRequired[list[str]], "setups_removed": NotRequired[list[str]],
    "rows": NotRequired[list[RowChange]]})


def board_key(board: Mapping[str, Any]) -> str:
    """One board's identity across versions: ``venue_id · metric · estimator · preprocessor``."""
    return f"{board['venue_id']} · {board['metric']} · {board['estimator']} · {board['preprocessor']}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def _venue_causes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, _VenueCauses]:
    """Per venue: papers entered and left, new reference reviews and edited ones (on the new version's papers)."""
    old_papers, new_papers = old.get("papers", {}), new.get("papers", {})
    venue_of = {p: v for v, ps in new_papers.items() for p in ps}
    out: dict[str, _VenueCauses] = {}
    for venue in sorted(set(old_papers) | set(new_papers)):
        before, after = set(old_papers.get(venue, [])), set(new_papers.get(venue, []))
        out[venue] = {"papers_entered": sorted(after - before), "papers_left": sorted(before - after),
                      "new_references": [], "edited_reviews": []}
    old_refs, new_refs = old.get("references", {}), new.get("references", {})
    for review_id in sorted(new_refs):
        ref = new_refs[review_id]
        venue = venue_of.get(ref["paper_id"])
        if venue is None:
            continue
        if review_id not in old_refs:
            out[venue]["new_references"].append({"review_id": review_id, "paper_id": ref["paper_id"]})
        elif old_refs[review_id]["version"] != ref["version"]:
            out[venue]["edited_reviews"].append({"review_id": review_id, "paper_id": ref["paper_id"],
                                                 "from_version": old_refs[review_id]["version"],
                                                 "to_version": ref["version"]})
    return out


def _predecessors(old_boards: dict[str, dict[str, Any]], new_boards: dict[str, dict[str, Any]]
                  ) -> dict[str, tuple[str, bool]]:
    """New board key -> (the old board it follows, whether the setup changed): the same key, else the one old board
    of the same venue and metric that is gone (another estimator or preprocessor)."""
    gone = [k for k in old_boards if k not in new_boards]
    out = {}
    for key, b in new_boards.items():
        if key in old_boards:
            out[key] = (key, False)
            continue
        same = [k for k in gone
                if (old_boards[k]["venue_id"], old_boards[k]["metric"]) == (b["venue_id"], b["metric"])]
        if len(same) == 1:
            out[key] = (same[0], True)
    return out


def _board_reasons(venue: _VenueCauses | None, setup_from: str | None, settings: tuple[Any, Any] | None) -> list[str]:
    """What changed under a whole board: its setup, its bootstrap settings, its venue's papers and references."""
    why = []
    if setup_from is not None:
        why.append(f"changed setup (was {setup_from})")
    if settings is not None:
        why.append(f"changed bootstrap settings ({settings[0]} → {settings[1]})")
    causes: tuple[tuple[Literal["papers_entered", "papers_left", "new_references", "edited_reviews"], str], ...] = (
        ("papers_entered", "paper(s) entered"), ("papers_left", "paper(s) left"),
        ("new_references", "new reference review(s)"), ("edited_reviews", "edited review(s)"))
    for field, word in causes:
        if venue is not None and venue[field]:
            why.append(f"{len(venue[field])} {word}")
    return why


def _crossed(name: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """The ranked rows that changed order with ``name`` (passed it, or fell behind it)."""
    mine = (before[name].get("rank"), after[name].get("rank"))
    if None in mine:
        return []
    return sorted(other for other in set(before) & set(after) if other != name
                  and None not in (before[other].get("rank"), after[other].get("rank"))
                  and (before[other]["rank"] < mine[0]) != (after[other]["rank"] < mine[1]))


def _row_change(board: str, name: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
                causes: list[str]) -> RowChange | None:
    """One row's change (None when it did not change) and why: its own papers and pairs, what changed under the
    board (when its score changed), the rows it changed order with and the rows new on the board."""
    old, new = before.get(name), after.get(name)
    entered = [n for n in after if n not in before and n != name]
    others = [f"new on the board: {', '.join(sorted(entered))}"] if entered else []
    if old is None or new is None:
        return {"board": board, "candidate": name, "change": "entered" if old is None else "left",
                "rank": [None if old is None else old.get("rank"), None if new is None else new.get("rank")],
                "score": [None if old is None else old.get("score"), None if new is None else new.get("score")],
                "why": causes}
    if all(_same(old.get(f), new.get(f)) for f in ("rank", "score", "status", "papers", "pairs")):
        return None
    why = [f"its {f} {old.get(f)} → {new.get(f)}" for f in ("papers", "pairs") if old.get(f) != new.get(f)]
    if old.get("status") != new.get("status"):
        why.append(f"status {old.get('status')} → {new.get('status')}")
    if not _same(old.get("score"), new.get("score")):
        why += causes
    crossed = _crossed(name, before, after)
    if crossed:
        why.append(f"changed order with {', '.join(crossed)}")
    return {"board": board, "candidate": name, "change": "moved" if old.get("rank") != new.get("rank") else "rescored",
            "rank": [old.get("rank"), new.get("rank")], "score": [old.get("score"), new.get("score")],
            "why": why + others or ["recomputed with no recorded input changed"]}


def version_changes(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> VersionChanges:
    """What changed from version ``old`` to ``new`` (``old`` None: the first version) as JSON-ready data:
    ``papers_entered`` / ``papers_left`` (per venue), ``new_references``, ``edited_reviews``,
    ``candidates_entered`` / ``candidates_left``, ``setups_added`` / ``setups_removed`` (board keys),
    and ``rows``: each row that entered, left, moved (rank) or was rescored, with its ``rank`` and ``score``
    before and after and ``why``."""
    new_boards = {board_key(b): b for b in new["boards"]}
    if old is None:
        return {"from": None, "to": new["version_id"], "first": True, "boards": len(new_boards),
                "rows_total": sum(len(b["rows"]) for b in new_boards.values())}
    old_boards = {board_key(b): b for b in old["boards"]}
    venues = _venue_causes(old.get("basis", {}), new.get("basis", {}))
    old_settings, new_settings = old.get("basis", {}).get("settings", {}), new.get("basis", {}).get("settings", {})
    follows = _predecessors(old_boards, new_boards)
    old_names = {r["candidate"] for b in old_boards.values() for r in b["rows"]}
    new_names = {r["candidate"] for b in new_boards.values() for r in b["rows"]}
    rows: list[RowChange] = []
    for key, board in new_boards.items():
        prev_key, setup_changed = follows.get(key, (None, False))
        before = {r["candidate"]: r for r in old_boards[prev_key]["rows"]} if prev_key else {}
        after = {r["candidate"]: r for r in board["rows"]}
        settings = None
        if prev_key and old_settings.get(prev_key) and new_settings.get(key) \
                and old_settings[prev_key] != new_settings[key]:
            settings = (old_settings[prev_key], new_settings[key])
        why = _board_reasons(venues.get(board["venue_id"]), prev_key if setup_changed else None, settings)
        if prev_key is None:
            why = ["a new board (a new venue, metric or setup)", *why]
        for name in sorted(set(before) | set(after)):
            change = _row_change(key, name, before, after, why)
            if change is not None:
                if change["change"] == "entered" and name not in old_names:
                    change["why"] = ["new candidate"]
                rows.append(change)
    followed = {k for k, _ in follows.values()}
    for key, board in old_boards.items():
        if key not in followed:
            rows += [{"board": key, "candidate": r["candidate"], "change": "left", "rank": [r.get("rank"), None],
                      "score": [r.get("score"), None], "why": ["its board is no longer published"]}
                     for r in board["rows"]]
    return {"from": old["version_id"], "to": new["version_id"], "first": False,
            "papers_entered": {v: c["papers_entered"] for v, c in venues.items() if c["papers_entered"]},
            "papers_left": {v: c["papers_left"] for v, c in venues.items() if c["papers_left"]},
            "new_references": [r for c in venues.values() for r in c["new_references"]],
            "edited_reviews": [r for c in venues.values() for r in c["edited_reviews"]],
            "candidates_entered": sorted(new_names - old_names), "candidates_left": sorted(old_names - new_names),
            "setups_added": sorted(k for k in new_boards if k not in old_boards),
            "setups_removed": sorted(k for k in old_boards if k not in new_boards),
            "rows": rows}


def _listed(items: list[str], shown: int = SHOWN) -> str:
    more = f" … and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _num(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def row_line(row: Mapping[str, Any]) -> str:
    """One changed row: ``good-llm: moved, rank 2 → 1, score 1.200 → 1.500 (2 paper(s) entered)``."""
    rank, score = row["rank"], row["score"]
    return (f"{row['candidate']}: {row['change']}, rank {_num(rank[0])} → {_num(rank[1])}, "
            f"score {_num(score[0])} → {_num(score[1])} ({'; '.join(row['why'])})")


def changes_text(changes: Mapping[str, Any]) -> str:
    """The changes of :func:`version_changes` as the CLI prints them (the version page shows the same)."""
    if changes.get("first"):
        return (f"version {changes['to']}: the first published version ({changes['boards']} boards, "
                f"{changes['rows_total']} rows)")
    lines = [f"changes from version {changes['from']} to {changes['to']}:"]
    for venue, papers in changes["papers_entered"].items():
        lines.append(f"  papers entered ({venue}): {_listed(papers)}")
    for venue, papers in changes["papers_left"].items():
        lines.append(f"  papers left ({venue}): {_listed(papers)}")
    if changes["new_references"]:
        refs = [f"{r['review_id']} (paper {r['paper_id']})" for r in changes["new_references"]]
        lines.append(f"  new reference reviews: {_listed(refs)}")
    if changes["edited_reviews"]:
        lines.append("  edited reviews: " + _listed([f"{r['review_id']} (paper {r['paper_id']}, version "
                                                    f"{r['from_version']} → {r['to_version']})"
                                                    for r in changes["edited_reviews"]]))
    for field, word in (("candidates_entered", "new candidates"), ("candidates_left", "candidates gone"),
                        ("setups_added", "boards added"), ("setups_removed", "boards removed")):
        if changes[field]:
            lines.append(f"  {word}: {_listed(changes[field])}")
    by_board: dict[str, list[str]] = {}
    for row in changes["rows"]:
        by_board.setdefault(row["board"], []).append(row_line(row))
    for board, rows in by_board.items():
        lines.append(f"  {board}:")
        lines += [f"    {line}" for line in rows[:SHOWN]]
        if len(rows) > SHOWN:
            lines.append(f"    … and {len(rows) - SHOWN} more rows")
    if len(lines) == 1:
        lines.append("  nothing on the boards changed")
    return "\n".join(lines)
