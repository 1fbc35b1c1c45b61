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
from collections.abc import Callable
from typing import Any

from grebench import metrics
from grebench.settings import Settings
from grebench.store import noted_damage, utcnow

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"


def latest_board(snapshot_con: Any) -> dict[str, Any] | None:
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


def health(settings: Settings, export_con: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of ``/healthz``: ``export_con()`` gives the reader database of the published export (it
    raises when the export cannot be read)."""
    try:
        board = latest_board(export_con())
    except Exception as exc:  # nothing published yet, or an export that cannot be read: not healthy
        return 503, {"status": "unavailable", "error": f"the published export cannot be read: "
                                                      f"{type(exc).__name__}: {str(exc)[:200]}"}
    body: dict[str, Any] = {"status": "ok", "board": board}
    damage = noted_damage(settings.db_path)
    body["store"] = "damaged" if damage is not None else "ok"
    try:
        service = json.loads(settings.service_status_path.read_text(encoding="utf-8"))
        check = next((j for j in service.get("jobs", []) if j.get("job_id") == "check"), None)
        if check is not None:
            body["last_check"] = {"status": check.get("status"), "finished_at": check.get("last_finished_at")}
    except (OSError, ValueError):
        pass  # no service (``grebench app`` alone): nothing to add
    return 200, body


class OpsEndpoints:
    """ASGI middleware answering ``GET``/``HEAD`` on :data:`HEALTH_PATH` and :data:`METRICS_PATH`; every other
    request goes to the app."""

    def __init__(self, app: Any, settings: Settings, export_con: Callable[[], Any]) -> None:
        self.app, self.settings, self.export_con = app, settings, export_con

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path")
        if scope.get("type") != "http" or path not in (HEALTH_PATH, METRICS_PATH):
            await self.app(scope, receive, send)
            return
        from anyio import to_thread

        if scope.get("method") not in ("GET", "HEAD"):
            status, body, ctype = 405, b"only GET\n", "text/plain; charset=utf-8"
        elif path == HEALTH_PATH:  # reading the export may rebuild the reader: not on the event loop
            status, doc = await to_thread.run_sync(health, self.settings, self.export_con)
            body, ctype = json.dumps(doc).encode("utf-8"), "application/json"
        else:
            body, ctype = await to_thread.run_sync(metrics.exposition)
            status = 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype.encode("latin-1")),
                                (b"content-length", str(len(body)).encode("ascii")),
                                (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})


def ops_endpoints(settings: Settings, export_con: Callable[[], Any]) -> Any:
    """:class:`OpsEndpoints` as a Starlette ``Middleware`` entry (for ``app_kwargs``)."""
    from starlette.middleware import Middleware

    return Middleware(OpsEndpoints, settings=settings, export_con=export_con)
