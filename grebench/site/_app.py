"""The Gradio app: browse the boards, submit an endpoint or a file of reviews written elsewhere, watch the queue.

It reads the Parquet files of ``grebench export`` (``DATA_DIR/export``), never the writer's live file, through the
shared, fingerprint-keyed cache of :mod:`._reader` (rebuilt only when a new export appears), and writes only to the
small queue file (see :mod:`._submissions`).  Every handler is also a public API endpoint: all checks happen
server-side in :mod:`._submissions`.
"""

from __future__ import annotations

import ipaddress
import math
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from grebench._offline import apply_offline_defaults
from grebench.endpoints import KeyVault, Resolver
from grebench.scoring import (
    CONTAMINATED_NOTE,
    INCOMPLETE_NOTE,
    format_p,
    headline_first,
    provenance,
    rank_word,
    sample_facts,
)
from grebench.settings import Settings
from grebench.site import _data
from grebench.site._build import publish_snapshots
from grebench.site._connections import guarded_uvicorn
from grebench.site._history import history_html
from grebench.site._labels import Labels
from grebench.site._limits import request_limits
from grebench.site._reader import (
    ReaderCache,
    Snapshot,
    StampCache,
    build_reader,
    file_stamp,
    reader_cache,
    tree_stamp,
)
from grebench.site._uploads import discard_upload
from grebench.store import REFERENCE, Store
from grebench.submissions import (
    UPLOAD_MAX_BYTES,
    ImportForm,
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    queue_import,
    queue_path,
    read_upload,
)

BOARD_COLUMNS = ["rank", "candidate", "kind", "score", "ci95_low", "ci95_high", "rank_interval", "papers",
                 "vs_human", "clean_papers", "complete", "missing_papers", "vouched", "sealed_share", "cost_usd",
                 "latency_s"]


TAB_IDS = ("leaderboard", "model", "paper", "submit", "queue", "downloads")

# Gradio queue: reads are cache hits after the first request per export (milliseconds), so they may run 8 at a time
# (a cache miss is computed once; the other requests for it wait for that result); submissions stay at 2 at a time
# (each resolves DNS and writes the queue file; the rate limit is checked under the queue's lock either way).
READ_CONCURRENCY = 8
SUBMIT_CONCURRENCY = 2
QUEUE_KWARGS: dict[str, Any] = {"default_concurrency_limit": READ_CONCURRENCY, "max_size": 256}


def reader_store(settings: Settings) -> Store:
    """A fresh in-memory store of every exported table (uncached; the app itself uses :func:`reader`)."""
    return build_reader(settings.export_path, tables=None)


def reader(settings: Settings) -> ReaderCache:
    """The shared reader cache of this data dir's export (one per process and export folder)."""
    return reader_cache(settings.export_path)


def blocked_paths(settings: Settings) -> list[str]:
    """Paths Gradio must never serve: the data dir (DuckDB, queue, exports, caches) and the config file."""
    paths = [settings.data_path, settings.db_path, queue_path(settings)]
    if settings.config_path is not None:
        paths.append(settings.config_path)
    return [str(Path(p).resolve()) for p in paths]


def launch_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of ``Blocks.launch``: no share link, no telemetry, nothing served from the data dir.

    Also points uvicorn's proxy-header handling at ``app_trusted_proxies``: Gradio builds its ``uvicorn.Config``
    without ``forwarded_allow_ips``, so uvicorn reads ``FORWARDED_ALLOW_IPS`` (default ``127.0.0.1,::1``) and would
    rewrite the client address from X-Forwarded-For of any same-host peer before the app's rule runs.
    """
    import gradio as gr

    os.environ["FORWARDED_ALLOW_IPS"] = forwarded_allow_ips(settings)

    theme = gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
    return {"server_name": settings.app_host, "server_port": settings.app_port, "share": False,
            "blocked_paths": blocked_paths(settings), "allowed_paths": [], "show_error": False,
            "enable_monitoring": False, "mcp_server": False, "pwa": False, "ssr_mode": False, "theme": theme,
            "footer_links": ["api"], "max_file_size": UPLOAD_MAX_BYTES,
            "state_session_capacity": settings.app_session_capacity,
            "app_kwargs": {"middleware": [request_limits(settings)]}}


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 3)
    return value


Choice = tuple[str, str]  # (label shown, value): Gradio dropdowns show the label and hand back the value


def _setup_value(board: Mapping[str, Any]) -> str:
    """The exact ids of a board's setup, as the setup dropdown's value."""
    return f"{board['estimator']} / {board['preprocessor']}"


def _board_choices(store: Store) -> tuple[list[str], list[Choice], list[Choice], list[str], list[str]]:
    """Filter choices, each list in headline order (:func:`grebench.scoring.headline_first`: GEM-S, a language-model
    estimator before a fast proxy, the latest venue-year), so that the first of each is the headline board; metrics
    and setups are named in words (:mod:`grebench.site._labels`), valued by their ids."""
    labels = Labels.load(store)
    boards = headline_first(_data.boards(store), labels.is_proxy)
    venues = list(dict.fromkeys(b["venue_id"] for b in boards))
    metrics = list(dict.fromkeys((labels.metric(b["metric"]), b["metric"]) for b in boards))
    setups = list(dict.fromkeys((labels.setup(b["estimator"], b["preprocessor"]), _setup_value(b)) for b in boards))
    models = [c["name"] for c in _data.candidates(store)]
    papers = [p["paper_id"] for p in _data.paper_ids(store)]
    return venues, metrics, setups, models, papers


def _boards(cache: ReaderCache, snap: Snapshot, sealed_only: bool = False) -> list[dict[str, Any]]:
    """The stored boards of one scope (computed by the scoring stage; the app formats, never computes)."""
    scope = "sealed" if sealed_only else "all"
    return cast("list[dict[str, Any]]", cache.view("boards", scope, lambda store: _data.boards(store, scope),
                                                   snap=snap))


def _match(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
           only_sealed: bool) -> dict[str, Any] | None:
    cache = reader(settings)
    snap = cache.snapshot()
    return next((b for b in _boards(cache, snap, bool(only_sealed)) if b["venue_id"] == venue
                 and b["metric"] == metric and _setup_value(b) == setup), None)


def board_table(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
                include_controls: bool, only_sealed: bool) -> list[list[Any]]:
    """The Leaderboard tab's rows for one filter choice (empty when the choice has no scores); an unranked row's
    rank cell says why, in the words of the site and the CLI (``contaminated``, ``reference``)."""
    board = _match(settings, venue, metric, setup, only_sealed)
    if board is None:
        return []
    rows = [r for r in board["rows"] if include_controls or r["role"] != REFERENCE]
    return [[_cell(r, c) for c in BOARD_COLUMNS] for r in rows]


def _cell(row: Mapping[str, Any], column: str) -> Any:
    """One cell of the Leaderboard tab: an unranked row's rank says why (``contaminated``, ``reference``), the
    rank interval reads as the site and the CLI write it (``1–3``)."""
    if column == "rank" and row.get("rank") is None:
        return row.get("rank_word") or rank_word(dict(row))
    if column == "rank_interval":
        return row.get("rank_range") or ""
    if column == "vs_human":  # the paired difference and the one paired test's p, as every page prints them
        diff = row.get("diff_vs_human")
        return "" if diff is None else f"{diff:+.2f} ({format_p(row.get('p_vs_human'), row.get('papers'))})"
    return _fmt(row.get(column))


def board_info(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
               only_sealed: bool) -> str:
    """The line above the Leaderboard tab's table: which board it is, its paper sample, a proxy's label and why a
    contaminated row is not ranked."""
    board = _match(settings, venue, metric, setup, only_sealed)
    if board is None:
        return "No scores for this choice."
    parts = [f"**{board.get('venue') or board['venue_id']} · {board.get('title') or board['metric']}**",
             f"Sample: **{sample_facts(board)['text']}**. Controls: {sample_facts(board)['controls']}."]
    if board.get("proxy"):
        parts.append("Scored by a fast proxy, not by the metric's language model: a quick stand-in, not the "
                     "headline result.")
    if any((r.get("rank_word") or rank_word(r)) == "incomplete" for r in board["rows"]):
        parts.append(INCOMPLETE_NOTE[0].upper() + INCOMPLETE_NOTE[1:])
    if any((r.get("rank_word") or rank_word(r)) == "contaminated" for r in board["rows"]):
        parts.append(CONTAMINATED_NOTE[0].upper() + CONTAMINATED_NOTE[1:])
    parts.append(produced_line(settings, board))
    return "\n\n".join(parts)


def produced_line(settings: Settings, board: Mapping[str, Any]) -> str:
    """One line of the board's provenance (:func:`grebench.scoring.provenance`, as leaderboard.json has it)."""
    cache = reader(settings)
    venue = str(board["venue_id"])
    prov = cache.view("provenance", venue, lambda store: provenance(store, venue))
    code, est = prov["code"], prov["estimators"].get(board["estimator"], {})
    facts = prov["venues"].get(venue, {})
    lm = f"`{board['estimator']}`" + (f" (weights {est['weights_sha8']}, {est.get('dtype') or 'dtype not named'})"
                                      if est.get("weights_sha8") else "")
    judges = ", ".join(f"{j['judge']} {'passed' if j['passed'] else 'failed'}"
                       for j in facts.get("panel") or []) or "no exam"
    seed = (facts.get("sample") or {}).get("seed")
    return (f"How this was produced: grebench {code['package_version']}"
            + (f" (commit {code['git_commit'][:12]})" if code["git_commit"] else "")
            + f", scoring code {code['scoring_sha256'][:12]}; evaluation LM {lm}; preprocessor "
            f"`{board['preprocessor']}`" + (f"; sample seed {seed}" if seed is not None else "")
            + f"; judge panel: {judges}. Rebuild: `{prov['rebuild']}`.")


def board_history(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
                  only_sealed: bool) -> str:
    """The board's history plot over its published versions (HTML: the site's figure, or "no history yet")."""
    board = _match(settings, venue, metric, setup, only_sealed)
    if board is None:
        return ""
    bid, title = str(board["board_id"]), str(board.get("title") or board["metric"])
    return cast("str", reader(settings).view("history", bid, lambda store: history_html(store, bid, title)))


def board_view(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
               include_controls: bool, only_sealed: bool) -> tuple[list[list[Any]], str, str]:
    """The Leaderboard tab for one filter choice: the rows, the line above them and the board's history plot."""
    return (board_table(settings, venue, metric, setup, include_controls, only_sealed),
            board_info(settings, venue, metric, setup, only_sealed),
            board_history(settings, venue, metric, setup, only_sealed))


class SnapshotDownloads:
    """The snapshots the Downloads tab serves, and nothing else.

    The data dir stays blocked for Gradio (:func:`blocked_paths`): its files are published into a folder of their
    own (hard-linked where the file system allows, else copied), rebuilt when the snapshots folder changes, and only
    that folder is a Gradio static path.  So ``/gradio_api/file=`` serves a snapshot file from the published copy,
    and still answers 403 for every other path, the snapshot's own path in the data dir included.
    """

    def __init__(self, source: Path) -> None:
        self.source = source
        self.root = Path(tempfile.mkdtemp(prefix="grebench-downloads-"))
        self._lock = threading.Lock()
        self._generation = 0
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.root, True)

    def publish(self) -> list[dict[str, Any]]:
        """Publish the current snapshots (a fresh sub-folder; the previous one is removed): listing with paths."""
        with self._lock:
            self._generation += 1
            target = self.root / str(self._generation)
            files = publish_snapshots(self.source, target)
            for old in self.root.iterdir():
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
            return [{**f, "path": str(target / f["name"])} for f in files]


def model_tables(settings: Settings, name: str) -> tuple[list[list[Any]], list[list[Any]], str]:
    """The Model tab: scores on every board (same numbers as the Leaderboard tab), contamination window, a sample."""
    cache = reader(settings)
    snap = cache.snapshot()

    def compute(store: Store) -> tuple[list[list[Any]], list[list[Any]], str]:
        m = _data.model_page(store, name, _boards(cache, snap))
        labels = Labels.load(store)
        scores = [[s["venue_id"], labels.metric(s["metric"]), labels.setup(s["estimator"], s["preprocessor"]),
                   s["rank"] if s["rank"] is not None else (s.get("rank_word") or rank_word(s)),
                   _fmt(s["score"]), _fmt(s["ci95_low"]), _fmt(s["ci95_high"]), s["papers"]] for s in m["scores"]]
        window = [[w["venue_id"], str(w["public_from"])[:10], w["papers"], w["clean"], w["sealed"]]
                  for w in m["window"]]
        sample = m["samples"][0] if m["samples"] else None
        text = "" if sample is None else sample["text"] + "\n\n— judgment lines —\n" + "\n".join(sample["lines"])
        return scores, window, text

    scores, window, text = cache.view("model", name, compute, snap=snap)
    return _copy(scores), _copy(window), text


#: The words of a line's class (grebench.scoring.line_class) in the Paper tab's shaded lines, and their colours.
LINE_WORDS = {"carries": "carries information", "none": "none", "less": "less than none"}
LINE_COLOURS = {"carries information": "green", "none": "gray", "less than none": "red"}


def attribution_spans(page: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The Paper tab's shaded lines: per candidate and attributing setup a heading, then each judgment line with
    its contribution to the headline metric (averaged over the references), labelled by its class."""
    spans: list[tuple[str, str | None]] = []
    for g in page.get("generations", []):
        for a in g.get("attribution", []):
            spans.append((f"{g['candidate']} · {a['shade']} · {a['estimator']} · {a['preprocessor']}\n", None))
            for x in a["lines"]:
                value = x["values"].get(a["shade"])
                shown = "—" if value is None else f"{value:.2f}"
                spans.append((f"{x['line']}  [{shown}]\n", LINE_WORDS.get(x["class"])))
    return spans


def paper_tables(settings: Settings, paper_id: str
                 ) -> tuple[str, list[list[Any]], list[list[Any]], list[tuple[str, str | None]]]:
    """The Paper tab: title and abstract, human and candidate reviews with judgment lines, per-pair scores, and
    each candidate's judgment lines shaded by contribution (:func:`attribution_spans`)."""
    def compute(store: Store) -> tuple[str, list[list[Any]], list[list[Any]], list[tuple[str, str | None]]]:
        p = _data.paper_page(store, paper_id)
        if not p:
            return "unknown paper", [], [], []
        reviews = [["human", r["signature"] or r["review_id"], r["text"], "\n".join(r["lines"])] for r in p["humans"]]
        reviews += [[g["candidate"], g["status"], g["text"] or g["error"] or "", "\n".join(g["lines"])]
                    for g in p["generations"]]
        pairs = [[s["metric"], s["candidate"], s["reference_review_id"], _fmt(s["pmi"])] for s in p["pair_scores"]]
        versions = "".join(f"\n{_data.version_line(v)}" for v in p.get("versions", []))
        return (f"{p['paper']['title']}{versions}\n\n{p['paper']['abstract'] or ''}", reviews, pairs,
                attribution_spans(p))

    head, reviews, pairs, spans = reader(settings).view("paper", paper_id, compute)
    return head, _copy(reviews), _copy(pairs), list(spans)


def _import_check(store: Store) -> tuple[frozenset[str], frozenset[str]]:
    """What an uploaded import is checked against: the exported papers, and the candidate names in use."""
    return (frozenset(p["paper_id"] for p in _data.paper_ids(store)),
            frozenset(c["name"] for c in _data.candidates(store)))


def _upload_path(upload: Any) -> str | None:
    """The server-side path Gradio gives an uploaded file (a str, or an object with ``name``/``path``)."""
    if upload is None or isinstance(upload, str):
        return upload
    for attr in ("path", "name"):
        value = upload.get(attr) if isinstance(upload, dict) else getattr(upload, attr, None)
        if isinstance(value, str):
            return value
    return None


def _copy(rows: list[list[Any]]) -> list[list[Any]]:
    """Fresh row lists for Gradio (the cached ones are shared between requests)."""
    return [list(r) for r in rows]


def trusted_proxies(spec: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """The ``app_trusted_proxies`` networks (ValueError naming a bad entry)."""
    nets = []
    for item in (x.strip() for x in spec.split(",")):
        if item:
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"app_trusted_proxies: {item!r} is not a network (CIDR)") from None
    return tuple(nets)


def forwarded_allow_ips(settings: Settings) -> str:
    """uvicorn's ``forwarded_allow_ips`` for these settings: exactly the ``app_trusted_proxies`` networks ('' when
    none: uvicorn then believes no forwarded header)."""
    return ",".join(str(net) for net in trusted_proxies(settings.app_trusted_proxies))


def client_address(request: Any, proxies: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network] = ()) -> str | None:
    """The address the request came from, as the app's socket saw it.  Forwarded headers are believed only when the
    socket's peer is one of the operator's ``proxies``: then the rightmost X-Forwarded-For entry that is not a
    trusted proxy (entries further left are the client's to write)."""
    client = getattr(request, "client", None)
    host = str(getattr(client, "host", None) or "") or None

    def trusted(address: str | None) -> bool:
        try:
            ip = ipaddress.ip_address((address or "").strip())
        except ValueError:
            return False
        return any(ip in net for net in proxies)

    if host is None or not trusted(host):
        return host
    headers = getattr(request, "headers", None) or {}
    hops = [h.strip() for h in str(headers.get("x-forwarded-for", "")).split(",") if h.strip()]
    for hop in reversed(hops):
        if not trusted(hop):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return host  # garbage in the header: the proxy's own address counts
    return host


def create_app(settings: Settings, resolver: Resolver | Mapping[str, Iterable[str]] | None = None,
               vault: KeyVault | None = None, queue: SubmissionQueue | None = None) -> Any:
    """Build the app (a ``gr.Blocks``); tests pass a resolver table so that no DNS query leaves the machine."""
    apply_offline_defaults()  # before gradio is imported: it reads these switches at import time
    import gradio as gr

    _tab_from_query.__annotations__["request"] = gr.Request  # how Gradio knows to pass the request
    vault = vault or KeyVault()
    queue = queue or SubmissionQueue(queue_path(settings))
    proxies = trusted_proxies(settings.app_trusted_proxies)  # whose X-Forwarded-For the rate limit believes

    def load_choices() -> tuple[Any, ...]:
        cache = reader(settings)
        venues, metrics, setups, models, papers = cache.view("choices", None, _board_choices)
        # the headline board first (GEM-S, a language model, the latest venue): _board_choices orders the choices
        first = (venues[0] if venues else None, metrics[0][1] if metrics else None, setups[0][1] if setups else None)
        rows, info, plot = board_view(settings, *first, True, False)
        folders = snapshot_folders()
        return (gr.update(choices=venues, value=first[0]), gr.update(choices=metrics, value=first[1]),
                gr.update(choices=setups, value=first[2]), rows, gr.update(choices=list(models)),
                gr.update(choices=list(papers)), queue_rows(), downloads(), info,
                gr.update(choices=folders, value=folders[0] if folders else None), plot)

    def model_view(name: str | None) -> tuple[list[list[Any]], list[list[Any]], str]:
        return model_tables(settings, name) if name else ([], [], "")

    def paper_view(paper_id: str | None
                   ) -> tuple[str, list[list[Any]], list[list[Any]], list[tuple[str, str | None]]]:
        return paper_tables(settings, paper_id) if paper_id else ("", [], [], [])

    def submit(model_name: str, model_string: str, base_url: str, released: str, cutoff: str, contact: str,
               api_key: str, params: str, request: Any = None) -> str:
        form = SubmissionForm(model_name=model_name or "", model_string=model_string or "", base_url=base_url or "",
                              released=released or "", cutoff=cutoff or "", contact=contact or "",
                              api_key=api_key or "", params=params or "")
        message = str(queue.submit(form, settings, vault, resolver, source=client_address(request, proxies))["message"])
        queue_cache.clear()  # the Queue tab shows one's own submission at once
        return message

    def submit_import(candidate: str, contact: str, cutoff: str, model: str, description: str, upload: Any,
                      request: Any = None) -> str:
        form = ImportForm(candidate=candidate or "", contact=contact or "", cutoff=cutoff or "", model=model or "",
                          description=description or "")
        path = _upload_path(upload)
        try:
            data = read_upload(path)
        except SubmissionError as exc:
            queue.record_refusal(client_address(request, proxies))
            return f"Rejected: {exc}"
        finally:
            discard_upload(path)  # the bytes are read (or refused): the uploaded copy goes now
        papers, names = reader(settings).view("import-check", None, _import_check)
        message = str(queue_import(queue, form, data, settings, papers, names,
                                   source=client_address(request, proxies))["message"])
        queue_cache.clear()
        return message

    # Gradio passes the request to a handler whose parameter is annotated gr.Request (the rate limit's address)
    submit.__annotations__["request"] = gr.Request
    submit_import.__annotations__["request"] = gr.Request

    def public_queue() -> list[list[Any]]:
        return [[r["id"], r["model_name"], r["status"], r["reason"] or "", str(r["created_at"])[:19]]
                for r in queue.public_rows()]

    # the queue file changes under the scheduler too: keyed by its (and its WAL's) size and mtime, at most 5 s old
    qfile = queue.path
    queue_cache = StampCache(lambda: file_stamp(qfile, qfile.with_name(qfile.name + ".wal")) if qfile else None,
                             public_queue, max_age_s=5.0 if qfile else 0.0)
    snapshots_dir = settings.snapshots_path
    published = SnapshotDownloads(snapshots_dir)
    gr.set_static_paths([published.root])  # the published copies only (see SnapshotDownloads)
    downloads_cache = StampCache(lambda: tree_stamp(snapshots_dir), published.publish)

    def queue_rows() -> list[list[Any]]:
        return _copy(queue_cache.get())

    def downloads() -> list[list[Any]]:
        return [[s["name"], s["bytes"], s["sha256"]] for s in downloads_cache.get()]

    def snapshot_folders() -> list[str]:
        return [m["folder"] for m in _data.snapshot_manifests(downloads_cache.get())]

    def snapshot_view(folder: str | None) -> tuple[list[str], str]:
        """One snapshot's files (real downloads) and the exact command that imports them."""
        manifest = next((m for m in _data.snapshot_manifests(downloads_cache.get()) if m["folder"] == folder), None)
        if manifest is None:
            return [], "No snapshots yet." if not folder else f"No snapshot {folder!r}."
        text = (f"**{manifest['folder']}**: {len(manifest['files'])} files, {manifest['bytes']} bytes. Download every "
                f"file into a folder named `{manifest['folder']}`, then:\n\n```\n{manifest['command']}\n```\n\n"
                f"`manifest.json` SHA-256: `{manifest['sha256']}` (the manifest holds the SHA-256 of every other "
                "file; the import refuses any other manifest).")
        return [f["path"] for f in manifest["files"]], text

    read: dict[str, Any] = {"concurrency_limit": READ_CONCURRENCY, "concurrency_id": "read"}
    with gr.Blocks(title="GRE-bench", analytics_enabled=False,
                   delete_cache=(settings.app_upload_ttl_s, settings.app_upload_ttl_s)) as demo:
        gr.Markdown("# GRE-bench\nLLMs ranked by how much information their peer reviews share with human reviews.")
        with gr.Tabs() as tabs:
            with gr.Tab("Leaderboard", id="leaderboard"):
                with gr.Row():
                    venue = gr.Dropdown(label="Venue-year", choices=[])
                    metric = gr.Dropdown(label="Metric", choices=[])
                    setup = gr.Dropdown(label="Evaluation model · preprocessor", choices=[])
                    controls = gr.Checkbox(label="Include controls", value=True)
                    sealed = gr.Checkbox(label="Only sealed generations", value=False)
                info = gr.Markdown(elem_id="board-info")
                board = gr.Dataframe(headers=BOARD_COLUMNS, interactive=False, label="Leaderboard",
                                     elem_id="board-table")
                # the board's history over its versions: the site's own figure (no click handler: it is a picture)
                history = gr.HTML(elem_id="board-history", js_on_load=None)
                filtered = _bind(board_view, settings)
                for widget in (venue, metric, setup, controls, sealed):
                    # Gradio accepts api_name=False (no API endpoint) at runtime; its stubs say str | None
                    widget.change(filtered, [venue, metric, setup, controls, sealed], [board, info, history],
                                  api_name=False, **read)  # type: ignore[arg-type]
            with gr.Tab("Model", id="model"):
                model = gr.Dropdown(label="Candidate", choices=[], allow_custom_value=True)
                model_scores = gr.Dataframe(headers=["venue", "metric", "setup", "rank", "score", "ci95_low",
                                                     "ci95_high", "papers"], interactive=False, label="Scores")
                model_window = gr.Dataframe(headers=["venue", "reviews public from", "papers", "clean", "sealed"],
                                            interactive=False, label="Contamination window")
                model_sample = gr.Textbox(label="Sample review", lines=12, interactive=False)
                model.change(model_view, model, [model_scores, model_window, model_sample], api_name="model",
                             **read)
            with gr.Tab("Paper", id="paper"):
                paper = gr.Dropdown(label="Paper", choices=[], allow_custom_value=True)
                paper_head = gr.Textbox(label="Paper", lines=6, interactive=False)
                paper_reviews = gr.Dataframe(headers=["author", "by / status", "review", "judgment lines"],
                                             interactive=False, wrap=True, label="Reviews")
                paper_pairs = gr.Dataframe(headers=["metric", "candidate", "reference", "pmi"], interactive=False,
                                           label="Per-pair scores")
                paper_lines = gr.HighlightedText(label="Judgment lines by contribution (leave-one-out, nats, mean "
                                                       "over references; docs/scoring.md)", color_map=LINE_COLOURS,
                                                 show_legend=True, combine_adjacent=False)
                paper.change(paper_view, paper, [paper_head, paper_reviews, paper_pairs, paper_lines],
                             api_name="paper", **read)
            with gr.Tab("Submit", id="submit"):
                gr.Markdown("Submit a model: a litellm model string (hosted providers) or an OpenAI-compatible "
                            "base URL (https, public address). It is evaluated on papers whose reviews became public "
                            "after its training-data cutoff. The API key is optional, encrypted or kept in memory "
                            "only, never shown back, and deleted when the evaluation ends.")
                s_name = gr.Textbox(label="Model name")
                s_model = gr.Textbox(label="litellm model string", placeholder="openai/gpt-4o-mini")
                s_url = gr.Textbox(label="OpenAI-compatible base URL", placeholder="https://api.example.com/v1")
                s_released = gr.Textbox(label="Release date (YYYY-MM-DD)")
                s_cutoff = gr.Textbox(label="Training-data cutoff (YYYY-MM-DD)")
                s_contact = gr.Textbox(label="Contact (e-mail or handle)")
                s_key = gr.Textbox(label="API key (optional)", type="password")
                s_params = gr.Textbox(label="Parameters (JSON, optional)", placeholder='{"temperature": 0.7}')
                s_button = gr.Button("Submit", variant="primary")
                s_result = gr.Markdown(elem_id="submit-result")
                s_button.click(submit, [s_name, s_model, s_url, s_released, s_cutoff, s_contact, s_key, s_params],
                               s_result, api_name="submit", concurrency_limit=SUBMIT_CONCURRENCY,
                               concurrency_id="submit")
                gr.Markdown("### Reviews written elsewhere\nA JSON Lines file, one object per paper: `paper_id`, "
                            "`review` and optionally `generated_at` (ISO 8601), see docs/candidates.md. Up to "
                            f"{UPLOAD_MAX_BYTES // 2**20} MB and 100 kB per review. Every line is checked: a file "
                            "with any bad line is refused whole and the bad lines are listed. Without a cutoff, only "
                            "reviews generated before a paper's reviews were public count.")
                i_name = gr.Textbox(label="Candidate name (imported reviews)")
                i_contact = gr.Textbox(label="Contact for the import (e-mail or handle)")
                i_cutoff = gr.Textbox(label="Model's training-data cutoff (YYYY-MM-DD, optional)")
                i_model = gr.Textbox(label="Model or system (optional)")
                i_description = gr.Textbox(label="Description (optional)")
                i_file = gr.File(label="Reviews (.jsonl)", file_types=[".jsonl"], type="filepath")
                i_button = gr.Button("Queue import")
                i_result = gr.Textbox(label="Import result", lines=6, interactive=False, elem_id="import-result")
                i_button.click(submit_import, [i_name, i_contact, i_cutoff, i_model, i_description, i_file],
                               i_result, api_name="submit_import", concurrency_limit=SUBMIT_CONCURRENCY,
                               concurrency_id="submit")
            with gr.Tab("Queue", id="queue"):
                q_table = gr.Dataframe(headers=["id", "model", "status", "reason", "submitted (UTC)"],
                                       interactive=False)
                gr.Button("Refresh").click(queue_rows, None, q_table, api_name="queue", **read)
            with gr.Tab("Downloads", id="downloads"):
                gr.Markdown("Snapshots (one per venue-year, frozen) with their SHA-256. Pick one, download its files "
                            "into a folder of its name and import it with the command shown. The static site's "
                            "`leaderboard.json` holds every board in a documented schema.")
                # custom values reach the handler, which serves only a published snapshot by its folder name
                d_choice = gr.Dropdown(label="Snapshot", choices=[], elem_id="snapshot-choice", allow_custom_value=True)
                d_info = gr.Markdown(elem_id="snapshot-info")
                d_files = gr.File(label="Files of this snapshot", file_count="multiple", interactive=False,
                                  elem_id="snapshot-files")
                d_choice.change(snapshot_view, d_choice, [d_files, d_info], api_name="snapshot", **read)
                d_table = gr.Dataframe(headers=["file", "bytes", "sha256"], interactive=False,
                                       label="Every snapshot file")
        demo.load(load_choices, None, [venue, metric, setup, board, model, paper, q_table, d_table, info, d_choice,
                                       history], api_name=False, **read)
        demo.load(_tab_from_query, None, tabs, api_name=False, **read)
    demo.queue(**QUEUE_KWARGS)
    # per-session state (the component values Gradio keeps for every visitor) is bounded: the oldest sessions go
    # first once there are more than this many (launch sets it too; set here so the bound holds from the start)
    demo.state_session_capacity = settings.app_session_capacity
    return demo


def _tab_from_query(request: Any) -> Any:
    """Deep links: ``?tab=submit`` opens that tab (Gradio injects the request: see ``create_app``)."""
    import gradio as gr

    wanted = str(request.query_params.get("tab", "")).lower() if request is not None else ""
    return gr.Tabs(selected=wanted) if wanted in TAB_IDS else gr.Tabs()


def _bind(fn: Any, settings: Settings) -> Any:
    def bound(*args: Any) -> Any:
        return fn(settings, *args)

    return bound


def launch(demo: Any, settings: Settings, **extra: Any) -> Any:
    """``demo.launch(**launch_kwargs(settings), **extra)`` with the connection guard in uvicorn (caps per address and in
    all, idle and header timeouts: :mod:`grebench.site._connections`)."""
    with guarded_uvicorn(settings, trusted_proxies(settings.app_trusted_proxies)):
        return demo.launch(**launch_kwargs(settings), **extra)


def launch_app(settings: Settings) -> None:
    """Serve the app until interrupted (``grebench app``)."""
    demo = create_app(settings)  # queue settings: QUEUE_KWARGS and per-event limits (see create_app)
    launch(demo, settings)
