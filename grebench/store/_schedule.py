"""Which snapshots are due, and cutting them: the yearly cut of each venue-year, and requested ones.

The yearly snapshot of a venue-year is cut once its day has come in the year after the venue
(:func:`snapshot_day`).  ``grebench snapshot export`` run while ``grebench serve`` holds the store leaves a request
file instead (a JSON list of venue-years, each as the command line accepts it: venue id, display name or slug).
The request file is claimed first by an atomic rename: a request written while the job runs lands in a new file
and is cut next time, never deleted unread; the claimed file goes only once each request is cut or recorded as a
failure (claims left by a job that was killed are taken up again).
"""

from __future__ import annotations

import json
import logging
import os
from datetime import date
from pathlib import Path
from typing import TypedDict

from grebench import stop
from grebench.store._records import utcnow
from grebench.store._snapshot import (
    Describe,
    SnapshotError,
    export_snapshot,
    file_sha256,
    find_venue,
    record_snapshot,
    venue_years,
    verify_snapshot,
)
from grebench.store._store import Store

log = logging.getLogger(__name__)


def snapshot_day(month_day: str, year: int) -> date:
    """The day of ``year`` on which snapshots are cut (``month_day`` is MM-DD, the setting ``snapshot_date``)."""
    try:
        month, day = (int(x) for x in str(month_day).split("-"))
        return date(year, month, day)
    except ValueError:
        raise ValueError(f"snapshot_date must be MM-DD (e.g. 01-15), got {month_day!r}") from None


def _claimed_requests(store: Store, run_id: str, requests: Path) -> tuple[list[str], list[Path]]:
    """The venue-years requested (claimed from the request file), and the claim files to delete once done."""
    if requests.is_file():
        os.replace(requests, requests.with_name(f"{requests.name}.claimed-{run_id}"))
    claims = sorted(requests.parent.glob(f"{requests.name}.claimed-*")) if requests.parent.is_dir() else []
    wanted: list[str] = []
    for claim in claims:
        try:
            listed = json.loads(claim.read_text(encoding="utf-8"))
            if not isinstance(listed, list):
                raise ValueError("not a JSON list of venue-years")
            wanted += [str(w) for w in listed if str(w) not in wanted]
        except (OSError, ValueError) as exc:
            bad = claim.with_name(claim.name.replace(".claimed-", ".bad-"))
            os.replace(claim, bad)  # kept for the operator to read, and recorded as a failure
            store.record_failure(run_id, "snapshot", str(requests),
                                 f"unreadable snapshot request file (kept as {bad.name}): {exc}")
    return wanted, [c for c in claims if c.exists()]


class CutSnapshot(TypedDict):
    """A snapshot the snapshot stage cut (or found cut and recorded)."""

    venue_id: str
    path: str
    reason: str                     # yearly | on-demand


class SnapshotsCut(TypedDict):
    """The snapshot stage's summary (:func:`cut_due_snapshots`)."""

    cut: list[CutSnapshot]


def cut_due_snapshots(store: Store, run_id: str, root: Path, requests: Path, month_day: str,
                      today: date | None = None, describe: Describe | None = None) -> SnapshotsCut:
    """Cut every due yearly snapshot under ``root`` and every request in ``requests``; failures are recorded.
    ``describe`` fills each manifest's ``provenance`` (:func:`export_snapshot`)."""
    today = today or utcnow().date()
    done = {r["venue_id"] for r in store.rows("SELECT venue_id FROM snapshots WHERE reason = 'yearly'")}
    todo: list[tuple[str, Path, str]] = []
    for v in venue_years(store):
        if v["venue_year"] and v["venue_id"] not in done and today >= snapshot_day(month_day, v["venue_year"] + 1):
            todo.append((v["venue_id"], root / v["slug"], "yearly"))
    wanted, claims = _claimed_requests(store, run_id, requests)
    for name in wanted:
        try:
            venue = find_venue(store, name)
        except SnapshotError as exc:
            store.record_failure(run_id, "snapshot", name[:200], f"requested snapshot: {exc}")
            log.error("snapshot request %r refused: %s", name[:200], exc)
            continue
        todo.append((venue["venue_id"], root / f"{venue['slug']}-{today.isoformat()}", "on-demand"))
    cut: list[CutSnapshot] = []
    for venue_id, out_dir, reason in todo:
        stop.check()
        try:
            if out_dir.exists() and reason == "yearly" and verify_snapshot(out_dir)["ok"]:
                manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))  # cut, unrecorded
                manifest.update(manifest_sha256=file_sha256(out_dir / "manifest.json"), path=str(out_dir))
            else:
                manifest = export_snapshot(store, venue_id, out_dir, replace=True, describe=describe)
            record_snapshot(store, manifest, reason)
            cut.append({"venue_id": venue_id, "path": str(out_dir), "reason": reason})
        except Exception as exc:  # one venue's failure is recorded; the others are still cut
            store.record_failure(run_id, "snapshot", venue_id, f"{type(exc).__name__}: {exc}")
    for claim in claims:
        claim.unlink(missing_ok=True)  # every request in it was cut or recorded as a failure above
    return {"cut": cut}
