"""``/healthz`` and ``/metrics`` for whoever runs the app: answered before Gradio (an ASGI middleware, outermost, so
a health probe is never rate-limited as a visitor would be).

``GET /healthz``: 200 and a small JSON when the published export is readable (the app reads nothing else): the last
board version and its age, whether the store was found damaged, the service's last check; 503 with the reason
otherwise.  ``GET /metrics``: the Prometheus text format of :mod:`grebench.metrics` (in ``grebench serve``, the
scheduler's jobs too; the queue's length and the board's age are read at each scrape).  Neither says anything a
visitor could not see on the site (counts, times and the health of the service, no names or keys).
"""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from grebench import metrics
from grebench.store import noted_damage, utcnow

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"


class BoardAge(TypedDict):
    """The last board version of the published export: its id, when (ISO-8601 UTC), and how long ago (seconds)."""

    version: str
    published_at: str
    age_s: float


class Health(TypedDict):
    """The body of ``/healthz``."""

    status: str                                # ok | unavailable
    board: NotRequired[BoardAge | None]
    store: NotRequired[str]                    # ok | damaged (noted beside the file)
    last_check: NotRequired[dict[str, str | None]]
    error: NotRequired[str]


def latest_board(snapshot_con: Any) -> BoardAge | None:
    """The last board version of a reader database: its id, when it was published, and its age in seconds."""
    cur = snapshot_con.cursor()
    try:
        row = cur.execute("SELECT version_id, published_at FROM board_versions "
                          "ORDER BY published_at DESC, version_id DESC LIMIT 1").fetchone()
    finally:
        cur.close()
    if row is None:
        return None
    return {"version": row[0], "published_at": row[1].isoformat() + "Z",
            "age_s": round((utcnow() - row[1]).total_seconds(), 1)}


def health(db_file: Path, status_file: Path, export_con: Callable[[], Any]) -> tuple[int, Health]:
    """(HTTP status, body) of ``/healthz``: ``export_con()`` gives the reader database of the published export (it
    raises when the export cannot be read); ``db_file``: the store (is it noted damaged?); ``status_file``: what the
    service last wrote of its jobs (its last check)."""
    try:
        board = latest_board(export_con())
    except Exception as exc:  # nothing published yet, or an export that cannot be read: not healthy
        return 503, {"status": "unavailable", "error": f"the published export cannot be read: "
                                                      f"{type(exc).__name__}: {str(exc)[:200]}"}
    body: Health = {"status": "ok", "board": board,
                    "store": "damaged" if noted_damage(db_file) is not None else "ok"}
    try:
        service = json.loads(status_file.read_text(encoding="utf-8"))
        check = next((j for j in service.get("jobs", []) if j.get("job_id") == "check"), None)
        if check is not None:
            body["last_check"] = {"status": check.get("status"), "finished_at": check.get("last_finished_at")}
    except (OSError, ValueError):
        pass  # no service (``grebench app`` alone): nothing to add
    return 200, body


class OpsEndpoints:
    """ASGI middleware answering ``GET``/``HEAD`` on :data:`HEALTH_PATH` and :data:`METRICS_PATH`; every other
    request goes to the app."""

    def __init__(self, app: Any, health: Callable[[], tuple[int, Health]]) -> None:
        self.app, self.health = app, health

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path")
        if scope.get("type") != "http" or path not in (HEALTH_PATH, METRICS_PATH):
            await self.app(scope, receive, send)
            return
        from anyio import to_thread

        if scope.get("method") not in ("GET", "HEAD"):
            status, body, ctype = 405, b"only GET\n", "text/plain; charset=utf-8"
        elif path == HEALTH_PATH:  # reading the export may rebuild the reader: not on the event loop
            status, doc = await to_thread.run_sync(self.health)
            body, ctype = json.dumps(doc).encode("utf-8"), "application/json"
        else:
            body, ctype = await to_thread.run_sync(metrics.exposition)
            status = 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype.encode("latin-1")),
                                (b"content-length", str(len(body)).encode("ascii")),
                                (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})


def ops_endpoints(db_file: Path, status_file: Path, export_con: Callable[[], Any]) -> Any:
    """:class:`OpsEndpoints` as a Starlette ``Middleware`` entry (for ``app_kwargs``), answering :func:`health`."""
    from starlette.middleware import Middleware

    return Middleware(OpsEndpoints, health=lambda: health(db_file, status_file, export_con))
