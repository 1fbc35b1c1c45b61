"""Stages the scheduler runs besides the main job: the submission queue and the yearly snapshots.

They take what only the service has from ``ctx.services``: the submission ``queue``, the key ``vault`` and a
``resolver`` (tests pass a table so that no DNS query leaves the machine).
"""

from __future__ import annotations

import json
import logging
import os
from datetime import date
from pathlib import Path
from typing import Any

from grebench.pipeline._runner import BaseStage, StageContext
from grebench.settings import Settings
from grebench.store import utcnow

log = logging.getLogger(__name__)


def _pin_submitted(ctx: StageContext, api_base: str | None) -> tuple[list[Any], str | None]:
    """The pinned endpoint of a submitted base URL, checked again now, or the reason it may not be called.

    The address is pinned from this fresh check (not the one made at submission time): whatever DNS says now
    must still be a public address, and every call of this evaluation then goes to that one address.
    """
    from grebench.endpoints import URLRejected, check_submitted_url

    if not api_base:
        return [], None
    try:
        endpoint = check_submitted_url(api_base, ctx.settings, ctx.services.get("resolver"))
    except URLRejected as exc:
        return [], f"base URL rejected before evaluation: {exc}"
    if endpoint.url != api_base.rstrip("/"):
        return [], "base URL rejected before evaluation: it no longer normalises to the accepted URL"
    return [endpoint], None


class SubmissionsStage(BaseStage):
    """Accept queued submissions, generate their reviews on clean papers, and close them (the key goes with it).

    Queued imports (files of reviews written elsewhere, uploaded in the app) are imported here too: checked again
    against the live store and written in one transaction each (:func:`grebench.submissions.accept_queued_imports`).

    A submitted base URL is checked again just before its evaluation and every call goes to the address that
    check pinned (:func:`grebench.llm.pinned_endpoints`): no second DNS lookup, no redirect followed.
    """

    name = "submissions"
    description = "evaluate submitted model endpoints (pinned, key in memory only, deleted after); queued imports"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.bench import generate_for, stored_candidate, unreviewed_paper_ids
        from grebench.llm import pinned_endpoints
        from grebench.submissions import (
            accept_queued_imports,
            accept_queued_submissions,
            finish_submission,
            key_in_env,
        )

        store, queue, vault = ctx.store, ctx.services["queue"], ctx.services["vault"]
        accepted = accept_queued_submissions(store, queue, ctx.settings, ctx.services.get("resolver"))
        done = []
        for sub in store.rows("SELECT id, model_name FROM submissions WHERE status = 'running' ORDER BY created_at"):
            row = store.rows("SELECT * FROM candidates WHERE name = ?", [sub["model_name"]])
            if not row:
                finish_submission(queue, vault, sub["id"], False, "candidate missing from the store", store)
                continue
            pins, refused = _pin_submitted(ctx, row[0]["api_base"])
            if refused is not None:
                finish_submission(queue, vault, sub["id"], False, refused, store)
                done.append({"id": sub["id"], "ok": False, "error": refused})
                continue
            stored = queue.rows("SELECT key_ciphertext FROM submissions WHERE id = ?", [sub["id"]])
            secret = vault.open(sub["id"], stored[0]["key_ciphertext"] if stored else None)
            papers = [r["paper_id"] for r in store.rows("SELECT paper_id FROM baseline_splits ORDER BY paper_id")]
            papers += unreviewed_paper_ids(store)
            try:
                with pinned_endpoints(pins), key_in_env(sub["id"], None if secret is None else secret.reveal()) as env:
                    summary = generate_for(store, ctx.settings, ctx.run_id, [stored_candidate(row[0], env)], papers,
                                           clean_only=True, progress=ctx.progress)
            except Exception as exc:
                summary = {"error": f"{type(exc).__name__}: {exc}", "failed": 1}
            ok = not summary.get("failed") and not summary.get("gave_up") and "error" not in summary
            reason = None if ok else summary.get("error") or f"{summary.get('failed', 0)} generation(s) failed"
            finish_submission(queue, vault, sub["id"], ok, reason, store)
            done.append({"id": sub["id"], "ok": ok, **summary})
        imported = accept_queued_imports(store, queue, ctx.settings)
        return {"accepted": [c["name"] for c in accepted], "evaluated": done, "imported": imported}


def snapshot_day(settings: Settings, year: int) -> date:
    """The day of ``year`` on which snapshots are cut (``snapshot_date`` is MM-DD)."""
    try:
        month, day = (int(x) for x in str(settings.snapshot_date).split("-"))
        return date(year, month, day)
    except ValueError:
        raise ValueError(f"snapshot_date must be MM-DD (e.g. 01-15), got {settings.snapshot_date!r}") from None


def requests_path(settings: Settings) -> Path:
    """Where ``grebench snapshot export`` leaves a request while ``grebench serve`` holds the store."""
    return settings.data_path / "snapshot-requests.json"


class SnapshotStage(BaseStage):
    """Cut the yearly snapshot of each venue-year once its day has come (year after the venue), and requested ones."""

    name = "snapshot"
    description = "frozen per-venue-year snapshots (Parquet + manifest with SHA-256)"

    def __init__(self, today: date | None = None) -> None:
        self.today = today

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.store import (
            SnapshotError,
            export_snapshot,
            file_sha256,
            find_venue,
            record_snapshot,
            venue_years,
            verify_snapshot,
        )

        store, root = ctx.store, ctx.settings.data_path / "snapshots"
        today = self.today or utcnow().date()
        done = {r["venue_id"] for r in store.rows("SELECT venue_id FROM snapshots WHERE reason = 'yearly'")}
        todo: list[tuple[str, Path, str]] = []
        for v in venue_years(store):
            if v["venue_year"] and v["venue_id"] not in done and \
                    today >= snapshot_day(ctx.settings, v["venue_year"] + 1):
                todo.append((v["venue_id"], root / v["slug"], "yearly"))
        req = requests_path(ctx.settings)
        # claim the requests first (an atomic rename): one written while this job runs lands in a new file and is
        # cut next time, never deleted unread; the claimed file goes only once each request is cut or recorded
        # (claims left by a job that was killed are taken up again)
        if req.is_file():
            os.replace(req, req.with_name(f"{req.name}.claimed-{ctx.run_id}"))
        claims = sorted(req.parent.glob(f"{req.name}.claimed-*")) if req.parent.is_dir() else []
        requested: list[str] = []
        for claim in claims:
            try:
                listed = json.loads(claim.read_text(encoding="utf-8"))
                if not isinstance(listed, list):
                    raise ValueError("not a JSON list of venue-years")
                requested += [str(w) for w in listed if str(w) not in requested]
            except (OSError, ValueError) as exc:
                bad = claim.with_name(claim.name.replace(".claimed-", ".bad-"))
                os.replace(claim, bad)  # kept for the operator to read, and recorded as a failure
                store.record_failure(ctx.run_id, "snapshot", str(req),
                                     f"unreadable snapshot request file (kept as {bad.name}): {exc}")
        for wanted in requested:
            # a request names a venue-year as the command line accepts it: venue id, display name or slug
            try:
                venue = find_venue(store, str(wanted))
            except SnapshotError as exc:
                store.record_failure(ctx.run_id, "snapshot", str(wanted)[:200], f"requested snapshot: {exc}")
                log.error("snapshot request %r refused: %s", str(wanted)[:200], exc)
                continue
            todo.append((venue["venue_id"], root / f"{venue['slug']}-{today.isoformat()}", "on-demand"))
        cut = []
        for venue_id, out_dir, reason in todo:
            try:
                if out_dir.exists() and reason == "yearly" and verify_snapshot(out_dir)["ok"]:
                    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))  # cut, unrecorded
                    manifest.update(manifest_sha256=file_sha256(out_dir / "manifest.json"), path=str(out_dir))
                else:
                    manifest = export_snapshot(store, venue_id, out_dir, replace=True)
                record_snapshot(store, manifest, reason)
                cut.append({"venue_id": venue_id, "path": str(out_dir), "reason": reason})
            except Exception as exc:
                store.record_failure(ctx.run_id, "snapshot", venue_id, f"{type(exc).__name__}: {exc}")
        for claim in claims:
            claim.unlink(missing_ok=True)  # every request in it was cut or recorded as a failure above
        return {"cut": cut}
