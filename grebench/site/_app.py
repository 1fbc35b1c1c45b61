"""The Gradio app: browse the boards, submit an endpoint or a file of reviews written elsewhere, watch the queue.

It reads the Parquet files of ``grebench export`` (``DATA_DIR/export``), never the writer's live file, through the
shared, fingerprint-keyed cache of :mod:`._reader` (rebuilt only when a new export appears), and writes only to the
small queue file (see :mod:`._submissions`).  Every handler is also a public API endpoint: all checks happen
server-side in :mod:`._submissions`.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from grebench import metrics
from grebench._offline import apply_offline_defaults
from grebench.endpoints import KeyVault, Resolver
from grebench.scoring import (
    headline_first,
    rank_word,
)
from grebench.settings import AppSettings, Settings
from grebench.site import _data
from grebench.site._app_board import (
    DATATYPES,
    HEADERS,
    KEY_DATATYPES,
    KEY_HEADERS,
    KEY_WIDTHS,
    WIDTHS,
    board_history,
    board_view,
    controls_label,
    first_contestant,
    key_rows,
    setup_value,
    stored_boards,
)
from grebench.site._app_compare import HEADERS as COMPARE_HEADERS
from grebench.site._app_compare import URL_JS, compare_choices, compare_from_query, compare_view
from grebench.site._app_submit import build_submit_tab
from grebench.site._build import publish_snapshots
from grebench.site._cite import colophon
from grebench.site._connections import guarded_uvicorn
from grebench.site._data import SnapshotListing
from grebench.site._labels import Labels, human_size
from grebench.site._limits import request_limits
from grebench.site._ops import latest_board, ops_endpoints
from grebench.site._reader import (
    ReaderCache,
    StampCache,
    build_reader,
    file_stamp,
    reader_cache,
    tree_stamp,
)
from grebench.site._reviewtext import strip_prompt_markers
from grebench.store import Store
from grebench.submissions import (
    UPLOAD_MAX_BYTES,
    SubmissionQueue,
    queue_path,
)

log = logging.getLogger(__name__)
TAB_IDS = ("leaderboard", "model", "paper", "compare", "submit", "queue", "submissions", "downloads")
#: The Submissions tab's columns (the public log, grouped by submitter: :func:`log_rows`).
LOG_HEADERS = ["Submitter", "Submitted (UTC)", "Id", "Model", "Endpoint fingerprint", "Status", "Reason class",
               "Submitter's tries", "Submitter's variants scored", "Scores"]
#: The query parameters a view is linked by (``?tab=model&model=good-llm``; ``tab`` is one of :data:`TAB_IDS`):
#: the page opens on them and writes them back as the visitor changes tab or choice (history.replaceState), so the
#: address bar always links the view shown.  Other views add their own names (a compare view: ``compare=a,b``).
VIEW_PARAMS = ("tab", "venue", "metric", "setup", "sealed", "model", "paper", "snapshot")

#: The app's own styles: headers never break inside a word; below 900 px the board shows its key columns and a
#: toggle ("Show all columns") for the rest (Gradio puts ``.gradio-container… .contain`` before each selector: they
#: start inside it); text has at least 4.5:1 contrast (WCAG AA): the selected tab's orange
#: (#f97316: 2.8:1), the footer's "Use via API" and an upload box's "- or -" (#bbbbc2: 1.9:1) are darkened.
APP_CSS = """
th .header-content, th span.header { word-break: keep-all !important;
  overflow-wrap: normal !important; hyphens: none !important; }
#board-key, #board-all-columns { display: none !important; }
@media (max-width: 899px) {
  #board-key, #board-all-columns { display: block !important; }
  #board-table { display: none !important; }
  #board-area:has(#board-all-columns input:checked) #board-table { display: block !important; }
  #board-area:has(#board-all-columns input:checked) #board-key { display: none !important; }
}
button[role=tab].selected { color: #c2410c !important; }
footer .show-api, footer .show-api *, .or { color: #4b5563 !important; opacity: 1 !important; }
"""

#: Runs once in the page's head: keeps each form field's error tied to its field (aria-describedby, aria-invalid) as
#: the errors appear and go, and makes boxes that scroll reachable by keyboard (a review's text, a code block).
APP_HEAD = """<script>
(function () {
  function sync() {
    document.querySelectorAll('.field-error[id^="error-"]').forEach(function (mark) {
      var name = mark.id.slice(6), box = document.getElementById('submit-' + name)
        || document.getElementById('import-' + name.replace(/^import-/, ''));
      var input = box && box.querySelector('input, textarea');
      if (!input) { return; }
      var shown = mark.offsetParent !== null && mark.innerText.trim() !== '';
      if (shown) { input.setAttribute('aria-describedby', mark.id); input.setAttribute('aria-invalid', 'true'); }
      else if (input.getAttribute('aria-describedby') === mark.id) {
        input.removeAttribute('aria-describedby'); input.removeAttribute('aria-invalid'); }
    });
    document.querySelectorAll('.gradio-container textarea[readonly], .gradio-container pre').forEach(function (el) {
      if (!el.hasAttribute('tabindex') && el.scrollHeight > el.clientHeight + 1) { el.setAttribute('tabindex', '0'); }
    });
  }
  var pending = false;
  new MutationObserver(function () {
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; sync(); }); }
  }).observe(document.documentElement, {subtree: true, childList: true, attributes: true,
                                         attributeFilter: ['style', 'class', 'hidden']});
})();
</script>"""


def url_js(when: str = "true", **params: str) -> str:
    """The client-side part of an event (Gradio's ``js=``, run in the browser, no server call): write the view's
    parameters (``name=JS expression`` over the event's inputs ``a``, ``b``, ...) into the address bar with
    ``history.replaceState`` (no new history entry) when the JS expression ``when`` holds; an empty value removes
    its parameter."""
    names = "abcdefgh"
    sets = "".join(f"set({name!r}, {expr});" for name, expr in params.items())
    return (f"({', '.join(names)}) => {{ if (!({when})) return [{', '.join(names)}]; "
            "const u = new URL(window.location.href); "
            "const set = (k, v) => { if (v === null || v === undefined || v === '' || v === false) "
            "u.searchParams.delete(k); else u.searchParams.set(k, v === true ? '1' : String(v)); }; "
            f"{sets} window.history.replaceState(window.history.state, '', u); return [{', '.join(names)}]; }}")


def query(request: Any, name: str) -> str:
    """One query parameter of the page's address ('' when absent or without a request)."""
    params = getattr(request, "query_params", None) if request is not None else None
    return str(params.get(name, "")) if params is not None else ""


def _pick(choices: Sequence[Any], wanted: str) -> Any:
    """The value of ``wanted`` among dropdown ``choices`` ((label, value) pairs or values), else the first."""
    values = [c[1] if isinstance(c, tuple) else c for c in choices]
    return wanted if wanted and wanted in values else (values[0] if values else None)

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

    os.environ["FORWARDED_ALLOW_IPS"] = forwarded_allow_ips(settings.app)

    # the primary button's white text on orange 500 read 2.8:1 (issue 63); on orange 700 it is 5.2:1 (WCAG AA: 4.5:1)
    theme = gr.themes.Default(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]).set(
        button_primary_background_fill="*primary_700", button_primary_background_fill_hover="*primary_800",
        button_primary_border_color="*primary_700", button_primary_text_color="white",
        button_primary_background_fill_dark="*primary_700", button_primary_text_color_dark="white")
    return {"server_name": settings.app.app_host, "server_port": settings.app.app_port, "share": False,
            "blocked_paths": blocked_paths(settings), "allowed_paths": [], "show_error": False,
            "enable_monitoring": False, "mcp_server": False, "pwa": False, "ssr_mode": False, "theme": theme,
            "css": APP_CSS, "head": APP_HEAD,
            "footer_links": ["api"], "max_file_size": UPLOAD_MAX_BYTES,
            "state_session_capacity": settings.app.app_session_capacity,
            "app_kwargs": {"middleware": [ops_endpoints(settings.db_path, settings.service_status_path,
                                                        lambda: reader(settings).snapshot().con),
                                          request_limits(settings.app)]}}


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 3)
    return value


Choice = tuple[str, str]  # (label shown, value): Gradio dropdowns show the label and hand back the value


def _board_choices(store: Store) -> tuple[list[Choice], list[Choice], list[Choice], list[str], list[Choice]]:
    """Filter choices, each list in headline order (:func:`grebench.scoring.headline_first`: GEM-S, a language-model
    estimator before a fast proxy, the latest venue-year), so that the first of each is the headline board; venues,
    metrics and setups are named in words (:mod:`grebench.site._labels`), valued by their ids; papers by their title
    and venue (the dropdown filters by what is typed: a paper is found by its title), valued by their id."""
    labels = Labels.load(store)
    boards = headline_first(_data.boards(store), labels.is_proxy)
    venues = list(dict.fromkeys((labels.venue(b["venue_id"]), b["venue_id"]) for b in boards))
    metrics = list(dict.fromkeys((labels.metric(b["metric"]), b["metric"]) for b in boards))
    setups = list(dict.fromkeys((labels.setup(b["estimator"], b["preprocessor"]), setup_value(b)) for b in boards))
    models = [c["name"] for c in _data.candidates(store)]
    papers = [(f"{p['title']} · {labels.venue(p['venue_id'])}", p["paper_id"]) for p in _data.paper_ids(store)]
    return venues, metrics, setups, models, papers


def _openers(store: Store) -> tuple[str | None, str | None]:
    """Where the Model and Paper tabs open: the headline board's first contestant and a paper of its sample."""
    labels = Labels.load(store)
    boards = headline_first(_data.boards(store), labels.is_proxy)
    head = boards[0] if boards else None
    return first_contestant(head), _data.scored_paper(store, None if head is None else head["venue_id"])


#: The published downloads' folder in the system temp dir: the prefix, then the owning process's id and a dash.
DOWNLOADS_PREFIX = "grebench-downloads-"


def remove_orphaned_downloads(temp_dir: Path | None = None) -> list[Path]:
    """Remove the published-downloads folders of app processes that no longer run (killed, so their finalizer never
    ran): an app restarted after each kill would otherwise leave a copy of the snapshots behind every time.  A folder
    whose process still runs, or whose owner cannot be told, is kept.  Returns the folders removed."""
    removed = []
    for folder in Path(temp_dir or tempfile.gettempdir()).glob(f"{DOWNLOADS_PREFIX}*-*"):
        pid = folder.name[len(DOWNLOADS_PREFIX):].split("-", 1)[0]
        if (not pid.isdigit() or int(pid) == os.getpid() or folder.is_symlink() or not folder.is_dir()
                or folder.stat().st_uid != os.getuid()):
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except (OverflowError, OSError):
            continue  # runs as another user, or not a process id: not ours to remove
    return removed


class SnapshotDownloads:
    """The snapshots the Downloads tab serves, and nothing else.

    The data dir stays blocked for Gradio (:func:`blocked_paths`): its files are published into a folder of their
    own (hard-linked where the file system allows, else copied), rebuilt when the snapshots folder changes, and only
    that folder is a Gradio static path.  So ``/gradio_api/file=`` serves a snapshot file from the published copy,
    and still answers 403 for every other path, the snapshot's own path in the data dir included.
    """

    def __init__(self, source: Path, archives: Path | None = None, archive_max_bytes: int = 0) -> None:
        self.source = source
        self.archives, self.archive_max_bytes = archives, archive_max_bytes
        remove_orphaned_downloads()
        self.root = Path(tempfile.mkdtemp(prefix=f"{DOWNLOADS_PREFIX}{os.getpid()}-"))
        self._lock = threading.Lock()
        self._generation = 0
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.root, True)

    def publish(self) -> list[SnapshotListing]:
        """Publish the current snapshots (a fresh sub-folder; the previous one is removed): listing with paths."""
        with self._lock:
            self._generation += 1
            target = self.root / str(self._generation)
            files = publish_snapshots(self.source, target, self.archives, self.archive_max_bytes)
            for old in self.root.iterdir():
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
            return [{**f, "path": str(target / f["name"])} for f in files]

    def close(self) -> None:
        """Remove the published folder now (else when this object is collected or the interpreter exits normally,
        which ``grebench serve`` skips: it ends with ``os._exit`` after a signal)."""
        self._finalizer()


def model_tables(settings: Settings, name: str) -> tuple[list[list[Any]], list[list[Any]], str]:
    """The Model tab: scores on every board (same numbers as the Leaderboard tab), contamination window, a sample."""
    cache = reader(settings)
    snap = cache.snapshot()

    def compute(store: Store) -> tuple[list[list[Any]], list[list[Any]], str]:
        m = _data.model_page(store, name, stored_boards(cache, snap))
        labels = Labels.load(store)
        scores = [[labels.venue(s["venue_id"]), labels.metric(s["metric"]),
                   labels.setup(s["estimator"], s["preprocessor"]),
                   s["rank"] if s["rank"] is not None else (s.get("rank_word") or rank_word(s)),
                   _fmt(s["score"]), _fmt(s["ci95_low"]), _fmt(s["ci95_high"]), s["papers"]] for s in m["scores"]]
        window = [[labels.venue(w["venue_id"]), str(w["public_from"])[:10], w["papers"], w["clean"], w["sealed"]]
                  for w in m["window"]]
        sample = m["samples"][0] if m["samples"] else None
        text = "" if sample is None else (strip_prompt_markers(sample["text"]) + "\n\n— judgment lines —\n"
                                          + "\n".join(sample["lines"]))
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
        reviews = [["human", r["name"], strip_prompt_markers(r["text"]), "\n".join(r["lines"])]
                   for r in p["humans"]]
        reviews += [[g["candidate"], g["status"], strip_prompt_markers(g["text"] or g["error"] or ""),
                     "\n".join(g["lines"])] for g in p["generations"]]
        pairs = [[s["metric"], s["candidate"], s["reference"], _fmt(s["pmi"])] for s in p["pair_scores"]]
        versions = "".join(f"\n{_data.version_line(v)}" for v in p.get("versions", []))
        return (f"{p['paper']['title']}{versions}\n\n{p['paper']['abstract'] or ''}", reviews, pairs,
                attribution_spans(p))

    head, reviews, pairs, spans = reader(settings).view("paper", paper_id, compute)
    return head, _copy(reviews), _copy(pairs), list(spans)


def _import_check(store: Store) -> tuple[frozenset[str], frozenset[str]]:
    """What an uploaded import is checked against: the exported papers, and the candidate names in use."""
    return (frozenset(p["paper_id"] for p in _data.paper_ids(store)),
            frozenset(c["name"] for c in _data.candidates(store)))


def log_rows(store: Store) -> list[list[Any]]:
    """The public submissions log as the Submissions tab shows it: grouped by submitter, newest first within each
    (:func:`grebench.submissions.submission_log`: never a key, a URL or an e-mail address)."""
    out = []
    for group in _data.submissions_log(store):
        for e in group["entries"]:
            scores = "; ".join(f"{s['venue_id']} {s['metric']}: {s['score']:.3f}" for s in e["scores"]
                               if s["score"] is not None)
            model = (e["model_name"] or "") + (" (reviews uploaded)" if e["kind"] == "upload" else "")
            out.append([e["submitter"], e["submitted_at"].replace("T", " "), e["id"], model,
                        e["endpoint_fingerprint"] or "", e["status"], e["reason_class"] or "", e["variants"],
                        e["variants_scored"], scores])
    return out


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


def forwarded_allow_ips(app: AppSettings) -> str:
    """uvicorn's ``forwarded_allow_ips`` for these settings: exactly the ``app_trusted_proxies`` networks ('' when
    none: uvicorn then believes no forwarded header)."""
    return ",".join(str(net) for net in trusted_proxies(app.app_trusted_proxies))


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
    """Build the app (a ``gr.Blocks``); tests pass a resolver table so that no DNS query leaves the machine.

    A page load runs two handlers: ``load_board`` (the filters and the headline board: what a visitor looks at
    first, so it comes back on its own) and ``load_rest`` (the Model and Paper tabs opened on the headline's first
    contestant and a paper of its sample, the queue, the downloads, the history plot, the visitor's allowance).
    """
    apply_offline_defaults()  # before gradio is imported: it reads these switches at import time
    import gradio as gr

    _tab_from_query.__annotations__["request"] = gr.Request  # how Gradio knows to pass the request
    vault = vault or KeyVault()
    queue = queue or SubmissionQueue(queue_path(settings))
    proxies = trusted_proxies(settings.app.app_trusted_proxies)  # whose X-Forwarded-For the rate limit believes

    def address(request: Any) -> str | None:
        return client_address(request, proxies)

    def choices() -> Any:
        return reader(settings).view("choices", None, _board_choices)

    def opening(request: Any) -> tuple[str | None, str | None, str | None, bool]:
        """The board a page opens on: the one its address names (``?venue=&metric=&setup=&sealed=1``), else the
        headline board (GEM-S, a language model, the latest venue: _board_choices orders the choices)."""
        venues, metrics, setups, _, _ = choices()
        return (_pick(venues, query(request, "venue")), _pick(metrics, query(request, "metric")),
                _pick(setups, query(request, "setup")), query(request, "sealed") in ("1", "true"))

    def load_board(request: Any = None) -> tuple[Any, ...]:
        venues, metrics, setups, _, _ = choices()
        venue_id, metric_id, setup_id, only_sealed = opening(request)
        rows, control_rows, info = board_view(settings, venue_id, metric_id, setup_id, only_sealed)
        return (gr.update(choices=venues, value=venue_id), gr.update(choices=metrics, value=metric_id),
                gr.update(choices=setups, value=setup_id), rows, control_rows, info,
                gr.update(label=controls_label(len(control_rows))), key_rows(rows), only_sealed)

    def load_rest(request: Any = None) -> tuple[Any, ...]:
        _, _, _, models, papers = choices()
        venue_id, metric_id, setup_id, only_sealed = opening(request)
        model_first, paper_first = reader(settings).view("openers", None, _openers)
        linked = str(request.query_params.get("paper", "")) if request is not None else ""
        if linked and linked in {value for _, value in papers}:  # ?tab=paper&paper=ID: a review linked from Compare
            paper_first = linked
        folders = snapshot_folders()
        paper_values = [v for _, v in papers]
        return (gr.update(choices=list(models), value=query(request, "model") if query(request, "model") in models
                          else model_first),
                gr.update(choices=list(papers), value=query(request, "paper") if query(request, "paper")
                          in paper_values else paper_first),
                queue_rows(), downloads(), gr.update(choices=folders, value=_pick(folders, query(request, "snapshot"))),
                board_history(settings, venue_id, metric_id, setup_id, only_sealed), allowance(request))

    load_board.__annotations__["request"] = gr.Request
    load_rest.__annotations__["request"] = gr.Request

    def filtered(venue: str | None, metric: str | None, setup: str | None, sealed: bool) -> tuple[Any, ...]:
        rows, control_rows, info = board_view(settings, venue, metric, setup, sealed)
        return (rows, control_rows, info, gr.update(label=controls_label(len(control_rows))),
                board_history(settings, venue, metric, setup, sealed), key_rows(rows))

    def model_view(name: str | None) -> tuple[list[list[Any]], list[list[Any]], str]:
        return model_tables(settings, name) if name else ([], [], "")

    def paper_view(paper_id: str | None
                   ) -> tuple[str, list[list[Any]], list[list[Any]], list[tuple[str, str | None]]]:
        return paper_tables(settings, paper_id) if paper_id else ("", [], [], [])

    def load_compare(request: Any = None) -> tuple[Any, ...]:
        cache = reader(settings)
        a, b = compare_from_query(cache, request)
        choices = compare_choices(cache)
        text, rows = compare_view(cache, a, b)
        return gr.update(choices=choices, value=a), gr.update(choices=choices, value=b), text, rows

    load_compare.__annotations__["request"] = gr.Request

    def pair_view(a: str | None, b: str | None) -> tuple[str, list[list[Any]]]:
        return compare_view(reader(settings), a, b)

    def public_queue() -> list[list[Any]]:
        return [[r["id"], r["model_name"], r["status"], r["reason"] or "", str(r["created_at"])[:19]]
                for r in queue.public_rows()]

    # the queue file changes under the scheduler too: keyed by its (and its WAL's) size and mtime, at most 5 s old
    qfile = queue.path
    queue_cache = StampCache(lambda: file_stamp(qfile, qfile.with_name(qfile.name + ".wal")) if qfile else None,
                             public_queue, max_age_s=5.0 if qfile else 0.0)
    snapshots_dir = settings.snapshots_path
    published = SnapshotDownloads(snapshots_dir, settings.snapshot_archives_path,
                                  settings.service.snapshot_archive_max_mb * 2**20)
    gr.set_static_paths([published.root])  # the published copies only (see SnapshotDownloads)
    downloads_cache = StampCache(lambda: tree_stamp(snapshots_dir), published.publish)

    def queue_rows() -> list[list[Any]]:
        return _copy(queue_cache.get())

    def submissions_log() -> list[list[Any]]:
        return _copy(reader(settings).view("submissions-log", None, log_rows))

    def downloads() -> list[list[Any]]:
        return [[s["name"], human_size(s["bytes"]), s["sha256"]] for s in downloads_cache.get()]

    def snapshot_folders() -> list[str]:
        return [m["folder"] for m in _data.snapshot_manifests(downloads_cache.get())]

    def snapshot_view(folder: str | None) -> tuple[list[str], str]:
        """One snapshot: its archive (the snapshot's folder) and its files (real downloads), with the command."""
        manifest = next((m for m in _data.snapshot_manifests(downloads_cache.get()) if m["folder"] == folder), None)
        if manifest is None:
            return [], "No snapshots yet." if not folder else f"No snapshot {folder!r}."
        archive = manifest["archive"]
        return ([f["path"] for f in ([archive] if archive else []) + manifest["files"]],
                snapshot_text(manifest))

    read: dict[str, Any] = {"concurrency_limit": READ_CONCURRENCY, "concurrency_id": "read"}
    with gr.Blocks(title="GRE-bench", analytics_enabled=False,
                   delete_cache=(settings.app.app_upload_ttl_s, settings.app.app_upload_ttl_s)) as demo:
        gr.Markdown("# GRE-bench\nLLMs ranked by how much information their peer reviews share with human reviews.")
        with gr.Tabs() as tabs:
            with gr.Tab("Leaderboard", id="leaderboard") as tab_leaderboard:
                with gr.Row():
                    venue = gr.Dropdown(label="Venue-year", choices=[], scale=1)
                    metric = gr.Dropdown(label="Metric", choices=[], scale=1)
                    setup = gr.Dropdown(label="Evaluation model · preprocessor", choices=[], scale=3, min_width=240)
                sealed = gr.Checkbox(label="Only sealed generations", value=False)
                info = gr.Markdown(elem_id="board-info")
                with gr.Column(elem_id="board-area"):
                    # a phone (below 900 px, APP_CSS) sees the key columns, and the full table behind this toggle
                    gr.Checkbox(label="Show all columns", value=False, elem_id="board-all-columns")
                    board_key = gr.Dataframe(headers=KEY_HEADERS, datatype=KEY_DATATYPES, interactive=False,
                                             label="Contestants (key columns)", elem_id="board-key", max_height=4000,
                                             wrap=True, column_widths=KEY_WIDTHS)
                    # readable headers, numbers typed as numbers; no inner scroll box: every row shows
                    board = gr.Dataframe(headers=HEADERS, datatype=DATATYPES, interactive=False, label="Contestants",
                                         elem_id="board-table", max_height=4000, wrap=True, column_widths=WIDTHS)
                with gr.Accordion(controls_label(0), open=False, elem_id="board-controls") as fold:
                    control_table = gr.Dataframe(headers=HEADERS, datatype=DATATYPES, interactive=False,
                                                 label="Controls (not ranked)", elem_id="controls-table",
                                                 max_height=4000, wrap=True, column_widths=WIDTHS)
                # the board's history over its versions: the site's own figure (no click handler: it is a picture)
                history = gr.HTML(elem_id="board-history", js_on_load=None)
                for widget in (venue, metric, setup, sealed):
                    # Gradio accepts api_name=False (no API endpoint) at runtime; its stubs say str | None
                    widget.change(filtered, [venue, metric, setup, sealed], [board, control_table, info, fold,
                                                                             history, board_key],
                                  api_name=False, **read)  # type: ignore[arg-type]
                    # the address links the board shown (in the browser only: no server call)
                    widget.change(None, [venue, metric, setup, sealed], None, api_name=False,  # type: ignore[arg-type]
                                  js=url_js(venue="a", metric="b", setup="c", sealed="d"))
            with gr.Tab("Model", id="model") as tab_model:
                model = gr.Dropdown(label="Candidate", choices=[], allow_custom_value=True, elem_id="model-choice")
                model_scores = gr.Dataframe(headers=["Venue-year", "Metric", "Evaluation model · preprocessor", "Rank",
                                                     "Score (nats)", "95% CI low", "95% CI high", "Papers"],
                                            interactive=False, label="Scores", wrap=True)
                model_window = gr.Dataframe(headers=["Venue-year", "Reviews public from", "Papers", "Clean",
                                                     "Sealed"], interactive=False, label="Contamination window")
                model_sample = gr.Textbox(label="Sample review", lines=12, interactive=False)
                model.change(model_view, model, [model_scores, model_window, model_sample], api_name="model",
                             **read)
                model.change(None, model, None, api_name=False, js=url_js(model="a"))  # type: ignore[arg-type]
            with gr.Tab("Paper", id="paper") as tab_paper:
                paper = gr.Dropdown(label="Paper (type part of its title to search)", choices=[],
                                    allow_custom_value=True, elem_id="paper-choice")
                paper_head = gr.Textbox(label="Title and abstract", lines=6, interactive=False)
                paper_reviews = gr.Dataframe(headers=["Author", "Reviewer / status", "Review", "Judgment lines"],
                                             datatype=["str", "str", "markdown", "str"], interactive=False,
                                             wrap=True, label="Reviews")
                paper_pairs = gr.Dataframe(headers=["Metric", "Candidate", "Reference review", "PMI (nats)"],
                                           interactive=False, label="Per-pair scores")
                paper_lines = gr.HighlightedText(label="Judgment lines by contribution (leave-one-out, nats, mean "
                                                       "over references; docs/scoring.md)", color_map=LINE_COLOURS,
                                                 show_legend=True, combine_adjacent=False)
                paper.change(paper_view, paper, [paper_head, paper_reviews, paper_pairs, paper_lines],
                             api_name="paper", **read)
                paper.change(None, paper, None, api_name=False, js=url_js(paper="a"))  # type: ignore[arg-type]
            with gr.Tab("Compare", id="compare") as tab_compare:
                gr.Markdown("Two rows of the headline board paper by paper: the board's paired test and the papers "
                            "where they differ most. The pair is in the page's address (`?compare=a,b`): copy it to "
                            "link this comparison.")
                with gr.Row():
                    cmp_a = gr.Dropdown(label="A", choices=[], elem_id="compare-a")
                    cmp_b = gr.Dropdown(label="B", choices=[], elem_id="compare-b")
                cmp_text = gr.Markdown(elem_id="compare-test")
                cmp_table = gr.Dataframe(headers=COMPARE_HEADERS, interactive=False, wrap=True,
                                         label="Where they differ most", elem_id="compare-papers")
                for side in (cmp_a, cmp_b):
                    side.change(pair_view, [cmp_a, cmp_b], [cmp_text, cmp_table], js=URL_JS,
                                api_name="compare" if side is cmp_a else False, **read)  # type: ignore[arg-type]
            with gr.Tab("Submit", id="submit") as tab_submit:
                status, allowance = build_submit_tab(
                    settings, queue, vault, resolver, address, queue_cache.clear,
                    lambda: reader(settings).view("import-check", None, _import_check))
            with gr.Tab("Queue", id="queue") as tab_queue:
                q_table = gr.Dataframe(headers=["Id", "Model", "Status", "Reason", "Submitted (UTC)"],
                                       interactive=False)
                gr.Button("Refresh").click(queue_rows, None, q_table, api_name="queue", **read)
            with gr.Tab("Submissions", id="submissions") as tab_submissions:
                gr.Markdown("Every submission ever made, grouped by submitter: accepted, refused (with the class of "
                            "its reason), withdrawn, held or scored (with its scores). Nothing is deleted. A "
                            "submitter is shown by handle, never by e-mail address (`anon-` and a salted hash); an "
                            "endpoint by its fingerprint, never its address or key. As of the last published "
                            "export (the Queue tab shows what is waiting now); the same log: `grebench submissions "
                            "log --json`, the site's submissions page, every snapshot.")
                log_table = gr.Dataframe(headers=LOG_HEADERS, interactive=False, wrap=True, elem_id="submissions-log")
                gr.Button("Refresh").click(submissions_log, None, log_table, api_name="submissions_log", **read)
            with gr.Tab("Downloads", id="downloads") as tab_downloads:
                gr.Markdown("Snapshots (one per venue-year, frozen). Pick one: download its archive (one file: the "
                            "snapshot's folder, every file of it with its manifest), unpack it and import it with the "
                            "command shown (the import takes the archive itself too); the single files are listed "
                            "too. The static site's "
                            "`leaderboard.json` holds every board in a documented schema.")
                # custom values reach the handler, which serves only a published snapshot by its folder name
                d_choice = gr.Dropdown(label="Snapshot", choices=[], elem_id="snapshot-choice", allow_custom_value=True)
                d_info = gr.Markdown(elem_id="snapshot-info")
                d_files = gr.File(label="Archive and files of this snapshot", file_count="multiple",
                                  interactive=False, elem_id="snapshot-files")
                d_choice.change(snapshot_view, d_choice, [d_files, d_info], api_name="snapshot", **read)
                d_choice.change(None, d_choice, None, api_name=False,  # type: ignore[arg-type]
                                js=url_js(snapshot="a"))
                d_table = gr.Dataframe(headers=["File", "Size", "SHA-256"], interactive=False,
                                       label="Every snapshot file")
        tab_blocks = (tab_leaderboard, tab_model, tab_paper, tab_compare, tab_submit, tab_queue, tab_submissions,
                      tab_downloads)
        # the same foot as every page of the static site: cite, licence, contact, source
        gr.HTML(f"<footer>{colophon(settings.site).html()}</footer>", elem_id="colophon")
        demo.load(load_board, None, [venue, metric, setup, board, control_table, info, fold, board_key, sealed],
                  api_name=False, **read)
        demo.load(load_rest, None, [model, paper, q_table, d_table, d_choice, history, status], api_name=False,
                  **read)
        demo.load(load_compare, None, [cmp_a, cmp_b, cmp_text, cmp_table], api_name=False, **read)
        demo.load(submissions_log, None, log_table, api_name=False, **read)
        # the address names the tab shown: each tab's select writes ?tab=ID (in the browser only), once the page
        # has opened the tab its address asked for (a select fired while the tabs mount must not overwrite it)
        demo.load(_tab_from_query, None, tabs, api_name=False, **read).then(
            None, None, None, api_name=False, js="() => { window.grebenchTabOpened = true; return []; }")
        for tab_id, tab_block in zip(TAB_IDS, tab_blocks, strict=True):
            tab_block.select(None, None, None, api_name=False,  # type: ignore[arg-type]
                             js=url_js(when="window.grebenchTabOpened", tab=repr(tab_id)))
    demo.queue(**QUEUE_KWARGS)

    def warm_up() -> None:
        """Compute what the first page load reads (the reader's cache of the export, the headline board, the tabs'
        openers, the published downloads) before the app listens: its first visitor waits no longer than the next
        (issue 50; a cold first load took 3.4 s, warm ones 0.8 s).

        Also what Gradio itself does first on the first queued event: every event runs inside
        ``gradio.utils.MatplotlibBackendMananger``, which imports matplotlib (1.3-2.3 s on the build machine, once
        per process; issue 63 measured the first page's queue/join answering 1.1-1.6 s later than the next page's),
        and the change events the first load fires (the Model and Paper tabs filled for their openers)."""
        venue_id, metric_id, setup_id, _ = opening(None)
        with _gradio_event_context():
            load_board()
            load_rest()
            model_first, paper_first = reader(settings).view("openers", None, _openers)
            model_view(model_first)
            paper_view(paper_first)
            filtered(venue_id, metric_id, setup_id, False)

    def queue_length() -> float:
        return float(queue.waiting())

    def board_age() -> float | None:
        board = latest_board(reader(settings).snapshot().con)
        return None if board is None else float(board["age_s"])

    metrics.observe(queue_length, board_age)  # read at each scrape of /metrics
    demo.grebench_warm_up = warm_up  # called by launch()
    demo.grebench_downloads = published  # closed by close_app()
    # per-session state (the component values Gradio keeps for every visitor) is bounded: the oldest sessions go
    # first once there are more than this many (launch sets it too; set here so the bound holds from the start)
    demo.state_session_capacity = settings.app.app_session_capacity
    return demo


def snapshot_text(manifest: Mapping[str, Any]) -> str:
    """The Downloads tab's words for one snapshot: its archive and hash, and the command that imports it."""
    archive = manifest.get("archive")
    head = (f"**{manifest['folder']}**: {len(manifest['files'])} files, {human_size(manifest['bytes'])}. ")
    if archive:
        head += (f"Archive `{archive['name'].rsplit('/', 1)[-1]}` ({human_size(archive['bytes'])}), SHA-256 "
                 f"`{archive['sha256']}`: unpack it (`tar -xzf …`) where you run the command below. ")
    else:
        head += f"Download every file into a folder named `{manifest['folder']}`. "
    return (head + f"Then:\n\n```\n{manifest['command']}\n```\n\n`manifest.json` SHA-256: "
            f"`{manifest['sha256']}` (the manifest holds the SHA-256 of every other file; the import refuses any "
            "other manifest).")


def _gradio_event_context() -> Any:
    """The context Gradio runs every event in (``gradio.utils.MatplotlibBackendMananger``: it imports matplotlib the
    first time), or a no-op where this Gradio has none."""
    from contextlib import nullcontext

    try:
        from gradio.utils import MatplotlibBackendMananger
    except ImportError:  # pragma: no cover - another Gradio version
        return nullcontext()
    return MatplotlibBackendMananger()


def _tab_from_query(request: Any) -> Any:
    """Deep links: ``?tab=submit`` opens that tab, ``?compare=a,b`` the Compare tab (Gradio injects the request: see
    ``create_app``)."""
    import gradio as gr

    wanted = str(request.query_params.get("tab", "")).lower() if request is not None else ""
    if not wanted and request is not None and request.query_params.get("compare"):
        wanted = "compare"
    return gr.Tabs(selected=wanted) if wanted in TAB_IDS else gr.Tabs()


def _bind(fn: Any, settings: Settings) -> Any:
    def bound(*args: Any) -> Any:
        return fn(settings, *args)

    return bound


def launch(demo: Any, settings: Settings, **extra: Any) -> Any:
    """``demo.launch(**launch_kwargs(settings), **extra)`` with the connection guard in uvicorn (caps per address and in
    all, idle and header timeouts: :mod:`grebench.site._connections`)."""
    warm_up = getattr(demo, "grebench_warm_up", None)  # an app made by create_app: its first load computed now
    if warm_up is not None:
        try:
            warm_up()
        except Exception as exc:  # never keeps the app from starting: the first visitor then computes it
            log.warning("app: the first page load could not be computed ahead (%s: %s); the first visitor "
                        "computes it", type(exc).__name__, exc)
    with guarded_uvicorn(settings.app, trusted_proxies(settings.app.app_trusted_proxies)):
        return demo.launch(**launch_kwargs(settings), **extra)


def close_app(demo: Any) -> None:
    """Close the app (Gradio's ``close``: uvicorn stops serving; its thread is joined for at most 5 s) and remove
    its published downloads."""
    try:
        demo.close(verbose=False)
    finally:
        downloads = getattr(demo, "grebench_downloads", None)  # an app made by create_app
        if downloads is not None:
            downloads.close()


def launch_app(settings: Settings) -> int:
    """Serve the app until SIGTERM or Ctrl-C (``grebench app``), then close it and remove its published downloads,
    as ``grebench serve`` does; the exit status (:func:`grebench.stop.exit_status`: 0 after SIGTERM, 130 after
    Ctrl-C)."""
    from grebench import stop

    demo = create_app(settings)  # queue settings: QUEUE_KWARGS and per-event limits (see create_app)
    with stop.handling_signals():
        launch(demo, settings, prevent_thread_lock=True)
        try:
            stop.wait_for_stop()
        finally:
            close_app(demo)
    return stop.exit_status()
