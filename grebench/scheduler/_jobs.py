"""The scheduler's jobs: each one idempotent, resumable, and a function of (context, run id) → summary.

A job keeps its progress in the store through the stage it calls (ingest upserts one paper per transaction, bench
commits each generation, scoring caches every estimator answer), so a kill in the middle and a rerun repeat no LLM
or estimator call and lose nothing but the calls in flight.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Callable

from grebench.settings import Settings
from grebench.site._secrets import KeyVault
from grebench.site._submissions import SubmissionQueue
from grebench.store import Store, utcnow

log = logging.getLogger(__name__)
SOURCE_KINDS = ("openreview:", "archive:")


@dataclass
class JobContext:
    """What every job gets: the one writer store, the settings, and the submission queue with its key vault."""

    store: Store
    settings: Settings
    vault: KeyVault
    queue: SubmissionQueue
    resolver: Any = None  # name resolution of submitted hosts (None = the system resolver; tests pass a table)


def venue_sources(settings: Settings) -> list[str]:
    """Source specs of ``settings.venues``: a bare venue id means ``openreview:VENUE_ID``."""
    specs = []
    for item in str(settings.venues).split(","):
        item = item.strip()
        if item:
            specs.append(item if item == "bundled" or item.startswith(SOURCE_KINDS) else f"openreview:{item}")
    return specs


def poll(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Ingest new papers, reviews and review edits of every configured venue (one failing venue skips only itself)."""
    from grebench.ingest import resolve_source, run_ingest

    out: dict[str, Any] = {}
    for spec in venue_sources(ctx.settings):
        try:
            out[spec] = run_ingest(resolve_source(spec, ctx.settings), ctx.store, ctx.settings, run_id).as_json(
                ctx.store)
        except Exception as exc:  # a venue that cannot be reached is retried at the next poll
            reason = f"{type(exc).__name__}: {exc}"
            ctx.store.record_failure(run_id, "poll", spec, reason)
            out[spec] = {"error": reason}
        ctx.store.checkpoint()
    return {"venues": out}


def generate(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """LLM reviews of papers whose human reviews are not public yet: sealed, contamination-proof."""
    from grebench.scheduler._generate import generate_unreviewed, reseal

    resealed = reseal(ctx.store)
    return {**generate_unreviewed(ctx.store, ctx.settings, run_id), "resealed": resealed}


def score(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Once reviews appear: bench (baseline, controls, LLMs), scoring, validation and the panel, each cached."""
    from grebench.bench import run_bench
    from grebench.scheduler._generate import reseal
    from grebench.scoring import DEFAULT_METRICS, run_scoring
    from grebench.scoring._validate import latest_setup, store_report, validation_rows

    s, store = ctx.settings, ctx.store
    out: dict[str, Any] = {"resealed": reseal(store)}
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("bench", lambda: run_bench(store, s, run_id)),
        ("score", lambda: run_scoring(store, s, run_id, list(DEFAULT_METRICS), s.estimator, s.preprocessor)),
    ]
    for name, step in steps:
        try:
            out[name] = step()
        except Exception as exc:  # recorded; the next step works on what is stored
            store.record_failure(run_id, name, None, f"{type(exc).__name__}: {exc}")
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        store.checkpoint()
    fresh = out["score"].get("pairs_scored", 0) > 0
    if fresh or not store.scalar("SELECT count(*) FROM validation_reports"):
        try:
            est, prep = latest_setup(store, s.estimator, s.preprocessor)
            rows = validation_rows(store, est, prep, list(DEFAULT_METRICS), s.bootstrap_samples, s.seed)
            store_report(store, run_id, est, prep, rows)
            out["validate"] = {"rows": len(rows)}
        except LookupError as exc:
            out["validate"] = {"skipped": str(exc)}
    if fresh or not store.scalar("SELECT count(*) FROM panel_rankings"):
        from grebench.scoring.panel import run_panel

        try:
            panel = run_panel(store, s, run_id)
            out["panel"] = {k: panel.get(k) for k in ("votes", "verdicts", "flagged")}
        except Exception as exc:
            store.record_failure(run_id, "panel", None, f"{type(exc).__name__}: {exc}")
            out["panel"] = {"error": str(exc)}
    store.checkpoint()
    return out


def _pin_submitted(ctx: JobContext, api_base: str | None) -> tuple[list[Any], str | None]:
    """The pinned endpoint of a submitted base URL, checked again now, or the reason it may not be called.

    The address is pinned from this fresh check (not the one made at submission time): whatever DNS says now
    must still be a public address, and every call of this evaluation then goes to that one address.
    """
    from grebench.site._urlcheck import URLRejected, check_submitted_url

    if not api_base:
        return [], None
    try:
        endpoint = check_submitted_url(api_base, ctx.settings, ctx.resolver)
    except URLRejected as exc:
        return [], f"base URL rejected before evaluation: {exc}"
    if endpoint.url != api_base.rstrip("/"):
        return [], "base URL rejected before evaluation: it no longer normalises to the accepted URL"
    return [endpoint], None


def queue(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Accept queued submissions, generate their reviews on clean papers, and close them (the key goes with it).

    A submitted base URL is checked again just before its evaluation and every call goes to the address that
    check pinned (:func:`grebench.llm.pinned_endpoints`): no second DNS lookup, no redirect followed.
    """
    from grebench.llm import pinned_endpoints
    from grebench.scheduler._generate import generate as gen
    from grebench.scheduler._generate import key_in_env, stored_candidate, unreviewed_paper_ids
    from grebench.site._submissions import accept_queued_submissions, finish_submission

    store = ctx.store
    accepted = accept_queued_submissions(store, ctx.queue, ctx.settings, ctx.resolver)
    done = []
    for sub in store.rows("SELECT id, model_name FROM submissions WHERE status = 'running' ORDER BY created_at"):
        row = store.rows("SELECT * FROM candidates WHERE name = ?", [sub["model_name"]])
        if not row:
            finish_submission(ctx.queue, ctx.vault, sub["id"], False, "candidate missing from the store", store)
            continue
        pins, refused = _pin_submitted(ctx, row[0]["api_base"])
        if refused is not None:
            finish_submission(ctx.queue, ctx.vault, sub["id"], False, refused, store)
            done.append({"id": sub["id"], "ok": False, "error": refused})
            continue
        stored = ctx.queue.rows("SELECT key_ciphertext FROM submissions WHERE id = ?", [sub["id"]])
        secret = ctx.vault.open(sub["id"], stored[0]["key_ciphertext"] if stored else None)
        papers = [r["paper_id"] for r in store.rows("SELECT paper_id FROM baseline_splits ORDER BY paper_id")]
        papers += unreviewed_paper_ids(store)
        try:
            with pinned_endpoints(pins), key_in_env(sub["id"], None if secret is None else secret.reveal()) as env:
                summary = gen(store, ctx.settings, run_id, [stored_candidate(row[0], env)], papers, clean_only=True)
        except Exception as exc:
            summary = {"error": f"{type(exc).__name__}: {exc}", "failed": 1}
        ok = not summary.get("failed") and not summary.get("gave_up") and "error" not in summary
        reason = None if ok else summary.get("error") or f"{summary.get('failed', 0)} generation(s) failed"
        finish_submission(ctx.queue, ctx.vault, sub["id"], ok, reason, store)
        done.append({"id": sub["id"], "ok": ok, **summary})
    store.checkpoint()
    return {"accepted": [c["name"] for c in accepted], "evaluated": done}


def site(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Rebuild the static site and the Parquet exports the app reads (never the live file)."""
    from grebench.site import build_site

    built = build_site(ctx.store, ctx.settings, ctx.settings.site_path)
    written = ctx.store.export_parquet(ctx.settings.data_path / "export")
    return {"site": {k: str(v) for k, v in built.items()} if isinstance(built, dict) else str(built),
            "exported_tables": len(written)}


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


def snapshot(ctx: JobContext, run_id: str, today: date | None = None) -> dict[str, Any]:
    """Cut the yearly snapshot of each venue-year once its day has come (year after the venue), and requested ones."""
    from grebench.store._snapshot import export_snapshot, file_sha256, record_snapshot, venue_years, verify_snapshot

    store, root = ctx.store, ctx.settings.data_path / "snapshots"
    today = today or utcnow().date()
    done = {r["venue_id"] for r in store.rows("SELECT venue_id FROM snapshots WHERE reason = 'yearly'")}
    todo: list[tuple[str, Path, str]] = []
    for v in venue_years(store):
        if v["venue_year"] and v["venue_id"] not in done and today >= snapshot_day(ctx.settings, v["venue_year"] + 1):
            todo.append((v["venue_id"], root / v["slug"], "yearly"))
    req = requests_path(ctx.settings)
    requested = json.loads(req.read_text(encoding="utf-8")) if req.is_file() else []
    slugs = {v["venue_id"]: v["slug"] for v in venue_years(store)}
    for venue_id in requested:
        if venue_id in slugs:
            todo.append((venue_id, root / f"{slugs[venue_id]}-{today.isoformat()}", "on-demand"))
    cut = []
    for venue_id, out_dir, reason in todo:
        try:
            if out_dir.exists() and reason == "yearly" and verify_snapshot(out_dir)["ok"]:
                manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))  # cut, not recorded
                manifest.update(manifest_sha256=file_sha256(out_dir / "manifest.json"), path=str(out_dir))
            else:
                manifest = export_snapshot(store, venue_id, out_dir, replace=True)
            record_snapshot(store, manifest, reason)
            cut.append({"venue_id": venue_id, "path": str(out_dir), "reason": reason})
        except Exception as exc:
            store.record_failure(run_id, "snapshot", venue_id, f"{type(exc).__name__}: {exc}")
    if requested:
        req.unlink(missing_ok=True)
    return {"cut": cut}


JOBS: dict[str, Callable[[JobContext, str], dict[str, Any]]] = {
    "queue": queue, "poll": poll, "generate": generate, "score": score, "site": site, "snapshot": snapshot,
}
INTERVAL_SETTINGS = {"queue": "queue_interval_min", "poll": "poll_interval_min",
                     "generate": "generate_interval_min", "score": "score_interval_min",
                     "site": "site_interval_min", "snapshot": "snapshot_check_min"}
