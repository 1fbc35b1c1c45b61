"""The Gradio app: browse the boards, submit an endpoint, watch the queue.

It reads the Parquet files of ``grebench export`` (``DATA_DIR/export``) into an in-memory DuckDB on every page
load, never the writer's live file, and writes only to the small queue file (see :mod:`._submissions`).  Every
handler is also a public API endpoint: all checks happen server-side in :mod:`._submissions`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb

from grebench._offline import apply_offline_defaults
from grebench.settings import Settings
from grebench.site import _data
from grebench.site._secrets import KeyVault
from grebench.site._submissions import SubmissionForm, SubmissionQueue
from grebench.site._urlcheck import Resolver
from grebench.store import Store

BOARD_COLUMNS = ["rank", "candidate", "kind", "score", "ci95_low", "ci95_high", "rank_low", "rank_high", "papers",
                 "clean_papers", "sealed_share", "cost_usd", "latency_s"]


TAB_IDS = ("leaderboard", "model", "paper", "submit", "queue", "downloads")


def queue_path(settings: Settings) -> Path:
    """Where the app writes submissions (a separate file: the app never opens the main store for writing)."""
    return settings.data_path / "queue.duckdb"


def reader_store(settings: Settings) -> Store:
    """An in-memory store loaded from ``DATA_DIR/export/*.parquet`` (empty tables when nothing was exported)."""
    from grebench.store.migrations import m0004_llm

    con = duckdb.connect(":memory:")
    export = settings.data_path / "export"
    for path in sorted(export.glob("*.parquet")) if export.is_dir() else []:
        con.execute(f"CREATE TABLE \"{path.stem}\" AS SELECT * FROM read_parquet(?)", [str(path)])
    store = Store(con)
    if not _data.has_table(store, "papers"):  # nothing exported yet: the schema alone, so every page works
        from grebench.store._migrate import migrate

        migrate(con)
    elif not _data.has_table(store, "clean_pairs") and all(
            _data.has_table(store, t) for t in ("generations", "candidates")):
        view = m0004_llm.SQL[m0004_llm.SQL.index("CREATE VIEW clean_pairs"):]
        con.execute(view)
    return store


def blocked_paths(settings: Settings) -> list[str]:
    """Paths Gradio must never serve: the data dir (DuckDB, queue, exports, caches) and the config file."""
    paths = [settings.data_path, settings.db_path, queue_path(settings)]
    if settings.config_path is not None:
        paths.append(settings.config_path)
    return [str(Path(p).resolve()) for p in paths]


def launch_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments of ``Blocks.launch``: no share link, no telemetry, nothing served from the data dir."""
    import gradio as gr

    theme = gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
    return {"server_name": settings.app_host, "server_port": settings.app_port, "share": False,
            "blocked_paths": blocked_paths(settings), "allowed_paths": [], "show_error": False,
            "enable_monitoring": False, "mcp_server": False, "pwa": False, "ssr_mode": False, "theme": theme,
            "footer_links": ["api"]}


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 3)
    return value


def _board_choices(store: Store) -> tuple[list[str], list[str], list[str]]:
    boards = _data.boards(store)
    venues = sorted({b["venue_id"] for b in boards})
    metrics = sorted({b["metric"] for b in boards})
    setups = sorted({f"{b['estimator']} / {b['preprocessor']}" for b in boards})
    return venues, metrics, setups


def board_table(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
                include_controls: bool, only_sealed: bool) -> list[list[Any]]:
    """The Leaderboard tab's rows for one filter choice (empty when the choice has no scores)."""
    store = reader_store(settings)
    try:
        match = [b for b in _data.boards(store) if b["venue_id"] == venue and b["metric"] == metric
                 and f"{b['estimator']} / {b['preprocessor']}" == setup]
        if not match:
            return []
        board = _data.board_rows(store, match[0], samples=int(settings.bootstrap_samples), seed=int(settings.seed),
                                 sealed_only=bool(only_sealed))
    finally:
        store.con.close()
    rows = [r for r in board["rows"] if include_controls or r["kind"] != "control"]
    return [[_fmt(r.get(c)) for c in BOARD_COLUMNS] for r in rows]


def create_app(settings: Settings, resolver: Resolver | Mapping[str, Iterable[str]] | None = None,
               vault: KeyVault | None = None, queue: SubmissionQueue | None = None) -> Any:
    """Build the app (a ``gr.Blocks``); tests pass a resolver table so that no DNS query leaves the machine."""
    apply_offline_defaults()  # before gradio is imported: it reads these switches at import time
    import gradio as gr

    _tab_from_query.__annotations__["request"] = gr.Request  # how Gradio knows to pass the request
    vault = vault or KeyVault()
    queue = queue or SubmissionQueue(queue_path(settings))

    def load_choices() -> tuple[Any, ...]:
        store = reader_store(settings)
        try:
            venues, metrics, setups = _board_choices(store)
            models = [c["name"] for c in _data.candidates(store)]
            papers = [p["paper_id"] for p in _data.paper_ids(store)]
        finally:
            store.con.close()
        first = (venues[:1] or [None])[0], (metrics[:1] or [None])[0], (setups[:1] or [None])[0]
        rows = board_table(settings, *first, True, False)
        return (gr.update(choices=venues, value=first[0]), gr.update(choices=metrics, value=first[1]),
                gr.update(choices=setups, value=first[2]), rows, gr.update(choices=models),
                gr.update(choices=papers), queue_rows(), downloads())

    def model_view(name: str | None) -> tuple[list[list[Any]], list[list[Any]], str]:
        if not name:
            return [], [], ""
        store = reader_store(settings)
        try:
            boards = [_data.board_rows(store, b, samples=200, seed=int(settings.seed)) for b in _data.boards(store)]
            m = _data.model_page(store, name, boards)
        finally:
            store.con.close()
        scores = [[s["venue_id"], s["metric"], f"{s['estimator']} / {s['preprocessor']}", s["rank"],
                   _fmt(s["score"]), _fmt(s["ci95_low"]), _fmt(s["ci95_high"]), s["papers"]] for s in m["scores"]]
        window = [[w["venue_id"], str(w["public_from"])[:10], w["papers"], w["clean"], w["sealed"]]
                  for w in m["window"]]
        sample = m["samples"][0] if m["samples"] else None
        text = "" if sample is None else sample["text"] + "\n\n— judgment lines —\n" + "\n".join(sample["lines"])
        return scores, window, text

    def paper_view(paper_id: str | None) -> tuple[str, list[list[Any]], list[list[Any]]]:
        if not paper_id:
            return "", [], []
        store = reader_store(settings)
        try:
            p = _data.paper_page(store, paper_id)
        finally:
            store.con.close()
        if not p:
            return "unknown paper", [], []
        reviews = [["human", r["signature"] or r["review_id"], r["text"], "\n".join(r["lines"])] for r in p["humans"]]
        reviews += [[g["candidate"], g["status"], g["text"] or g["error"] or "", "\n".join(g["lines"])]
                    for g in p["generations"]]
        pairs = [[s["metric"], s["candidate"], s["reference_review_id"], _fmt(s["pmi"])] for s in p["pair_scores"]]
        head = f"{p['paper']['title']}\n\n{p['paper']['abstract'] or ''}"
        return head, reviews, pairs

    def submit(model_name: str, model_string: str, base_url: str, released: str, cutoff: str, contact: str,
               api_key: str, params: str) -> str:
        form = SubmissionForm(model_name=model_name or "", model_string=model_string or "", base_url=base_url or "",
                              released=released or "", cutoff=cutoff or "", contact=contact or "",
                              api_key=api_key or "", params=params or "")
        return str(queue.submit(form, settings, vault, resolver)["message"])

    def queue_rows() -> list[list[Any]]:
        return [[r["id"], r["model_name"], r["status"], r["reason"] or "", str(r["created_at"])[:19]]
                for r in queue.public_rows()]

    def downloads() -> list[list[Any]]:
        return [[s["name"], s["bytes"], s["sha256"]] for s in _data.snapshot_files(settings.data_path)]

    with gr.Blocks(title="GRE-bench", analytics_enabled=False) as demo:
        gr.Markdown("# GRE-bench\nLLMs ranked by how much information their peer reviews share with human reviews.")
        with gr.Tabs() as tabs:
            with gr.Tab("Leaderboard", id="leaderboard"):
                with gr.Row():
                    venue = gr.Dropdown(label="Venue-year", choices=[])
                    metric = gr.Dropdown(label="Metric", choices=[])
                    setup = gr.Dropdown(label="Estimator / preprocessor", choices=[])
                    controls = gr.Checkbox(label="Include controls", value=True)
                    sealed = gr.Checkbox(label="Only sealed generations", value=False)
                board = gr.Dataframe(headers=BOARD_COLUMNS, interactive=False, label="Leaderboard")
                filtered = _bind(board_table, settings)
                for widget in (venue, metric, setup, controls, sealed):
                    widget.change(filtered, [venue, metric, setup, controls, sealed], board, api_name=False)
            with gr.Tab("Model", id="model"):
                model = gr.Dropdown(label="Candidate", choices=[], allow_custom_value=True)
                model_scores = gr.Dataframe(headers=["venue", "metric", "setup", "rank", "score", "ci95_low",
                                                     "ci95_high", "papers"], interactive=False, label="Scores")
                model_window = gr.Dataframe(headers=["venue", "reviews public from", "papers", "clean", "sealed"],
                                            interactive=False, label="Contamination window")
                model_sample = gr.Textbox(label="Sample review", lines=12, interactive=False)
                model.change(model_view, model, [model_scores, model_window, model_sample], api_name="model")
            with gr.Tab("Paper", id="paper"):
                paper = gr.Dropdown(label="Paper", choices=[], allow_custom_value=True)
                paper_head = gr.Textbox(label="Paper", lines=6, interactive=False)
                paper_reviews = gr.Dataframe(headers=["author", "by / status", "review", "judgment lines"],
                                             interactive=False, wrap=True, label="Reviews")
                paper_pairs = gr.Dataframe(headers=["metric", "candidate", "reference", "pmi"], interactive=False,
                                           label="Per-pair scores")
                paper.change(paper_view, paper, [paper_head, paper_reviews, paper_pairs], api_name="paper")
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
                               s_result, api_name="submit")
            with gr.Tab("Queue", id="queue"):
                q_table = gr.Dataframe(headers=["id", "model", "status", "reason", "submitted (UTC)"],
                                       interactive=False)
                gr.Button("Refresh").click(queue_rows, None, q_table, api_name="queue")
            with gr.Tab("Downloads", id="downloads"):
                gr.Markdown("Snapshots (one per venue-year, frozen) with their SHA-256. The static site's "
                            "`leaderboard.json` holds every board in a documented schema.")
                d_table = gr.Dataframe(headers=["file", "bytes", "sha256"], interactive=False)
        demo.load(load_choices, None, [venue, metric, setup, board, model, paper, q_table, d_table], api_name=False)
        demo.load(_tab_from_query, None, tabs, api_name=False)
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


def launch_app(settings: Settings) -> None:
    """Serve the app until interrupted (``grebench app``)."""
    demo = create_app(settings)
    demo.queue(default_concurrency_limit=4, max_size=64)
    demo.launch(**launch_kwargs(settings))
