"""Cached model calls get an owner; generations that took another candidate's call time lose what it proved.

Before this migration the call cache (``llm_calls``) was keyed by the request alone: a submitted model naming the
same endpoint and model as an earlier one received the earlier one's replies *and their call times*, so reviews of a
submission made after the paper's reviews were public could be dated before and marked sealed.  From now on a row
has a namespace (``cache_scope``, see :mod:`grebench.llm._scope`) that is part of its key and of every lookup.

Existing rows had no owner.  For every call used by a submitted model's generation, the candidates that may have
made it are those whose generations use it and that existed when it was made (a submission exists from its
``created_at``; an operator candidate has no recorded start, so it always may have).  A generation is *proved* when
its candidate is the only one that may have made the call (or, for an operator candidate, when no submitted model
may have).  An unproved generation is **unsealed** (and flagged ``call_owner = "unproved"`` so that ``reseal`` never
seals it again; the call's own time is kept in ``cached_call_generated_at``), and when it is dated before its
submission existed it is **re-dated** to the submission's ``created_at`` (no review was written for a submission
before it was submitted).  Unsealing is what makes the board honest: its seal is the evidence of no contamination,
and a review served from someone else's call proves nothing about this candidate.

The calls themselves: a call used only by one submitted model that may have made it moves to that submission's own
namespace (``owner:submission:<id>``); every other call used by a submitted model is set aside as ``unknown-owner``
(kept for the record, its generations still link to it, never served).  Calls used only by operator candidates, and
every call of the scoring side, stay in the shared keyless namespace (NULL): the "unknown owner" rows that only the
operator's keyless requests reuse, so a rerun of the default job still makes no call.  The counts are logged and
recorded in ``board_changes``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

import duckdb

log = logging.getLogger(__name__)
UNKNOWN_OWNER = "unknown-owner"
SUBMITTED = "submitted"


def _scoped(scope: str, key: str) -> str:
    # the formula of grebench.llm._scope.scoped_key, frozen here as a migration must be
    return hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()


def _floors(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, datetime]]:
    """Submitted candidates: (submission id, created_at) of their first submission."""
    out: dict[str, tuple[str, datetime]] = {}
    for sub_id, name, created in con.execute(
            "SELECT id, model_name, created_at FROM submissions ORDER BY created_at, id").fetchall():
        out.setdefault(name, (sub_id, created))
    return out


def _plan(con: duckdb.DuckDBPyConnection) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(the generations' updates, new scope of each call key) for every call a submitted model used."""
    floors = _floors(con)
    submitted = {r[0] for r in con.execute("SELECT name FROM candidates WHERE kind = ?", [SUBMITTED]).fetchall()}
    submitted |= set(floors)
    by_key: dict[str, list[tuple[Any, ...]]] = {}
    for row in con.execute(
            "SELECT g.generation_id, g.candidate, g.request_key, g.generated_at, g.sealed, g.flags_json, "
            "c.generated_at FROM generations g LEFT JOIN llm_calls c ON c.request_key = g.request_key "
            "WHERE g.request_key IS NOT NULL").fetchall():
        by_key.setdefault(row[2], []).append(row)
    updates: list[dict[str, Any]] = []
    scopes: dict[str, str] = {}
    for key, gens in by_key.items():
        sharers = {g[1] for g in gens}
        if not sharers & submitted:
            continue  # operator candidates only: the shared namespace, unchanged
        call_at = gens[0][6] or min(g[3] for g in gens)
        possible = {n for n in sharers if n not in submitted or n not in floors or floors[n][1] <= call_at}
        for gid, name, _key, generated_at, sealed, flags_json, _call in gens:
            proved = possible == {name} or (name not in submitted and not possible & submitted)
            if proved:
                continue
            floor = floors[name][1] if name in floors else None
            redate = floor if floor is not None and generated_at < floor else None
            flags = json.loads(flags_json or "{}")
            flags.update(call_owner="unproved", cached_call_generated_at=str(call_at))
            updates.append({"generation_id": gid, "unseal": bool(sealed), "redate": redate,
                            "flags": json.dumps(flags, sort_keys=True, default=str)})
        owner = next(iter(sharers))
        if len(sharers) == 1 and possible == {owner}:
            scopes[key] = f"owner:submission:{floors[owner][0]}" if owner in floors else f"owner:candidate:{owner}"
        else:
            scopes[key] = UNKNOWN_OWNER
    return updates, scopes


def up(con: duckdb.DuckDBPyConnection) -> None:
    """Add ``llm_calls.cache_scope``; unseal/re-date the generations no call of their own proves; record counts."""
    con.execute("ALTER TABLE llm_calls ADD COLUMN cache_scope VARCHAR")
    calls = len(con.execute("SELECT request_key FROM llm_calls").fetchall())
    updates, scopes = _plan(con)
    for u in updates:
        con.execute("UPDATE generations SET sealed = false, flags_json = ?, "
                    "generated_at = coalesce(?, generated_at) WHERE generation_id = ?",
                    [u["flags"], u["redate"], u["generation_id"]])
    for key, scope in scopes.items():
        new = _scoped(scope, key)
        con.execute("UPDATE llm_calls SET request_key = ?, cache_scope = ? WHERE request_key = ?", [new, scope, key])
        con.execute("UPDATE generations SET request_key = ? WHERE request_key = ?", [new, key])
    counts = {"generations_unproved": len(updates), "unsealed": sum(u["unseal"] for u in updates),
              "redated": sum(u["redate"] is not None for u in updates),
              "calls_set_aside": sum(s == UNKNOWN_OWNER for s in scopes.values()),
              "calls_to_own_submission": sum(s != UNKNOWN_OWNER for s in scopes.values()), "calls_examined": calls}
    detail = (f"m0018 call-cache owners: {counts['generations_unproved']} generation(s) whose time no call made "
              f"for their candidate proves: {counts['unsealed']} unsealed, {counts['redated']} re-dated to their "
              f"submission's time; {counts['calls_set_aside']} cached call(s) set aside as of unknown owner (never "
              f"served), {counts['calls_to_own_submission']} moved to their submission's own namespace, of "
              f"{calls} cached call(s)")
    log.info("%s", detail)
    if calls:  # a store that had calls says what changed (0 included); a fresh store has nothing to say
        con.execute("INSERT INTO board_changes VALUES (?, 'note', 'call cache', ?)",
                    [datetime.now(UTC).replace(tzinfo=None), detail + " " + json.dumps(counts, sort_keys=True)])
