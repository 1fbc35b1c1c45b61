"""The static site: Jinja2 pages (autoescaped: reviews may hold hostile HTML), SVG plots and leaderboard.json.

Every link is relative, so the site works from ``file://`` and any static host; nothing is loaded from outside.
The site is built into a temporary sibling directory and swapped in, so a reader never sees half a site.  The build
checks the stop token (:mod:`grebench.stop`) between pages: a stop ends it within one page, the temporary folder is
removed, the published site is left as it was, and a board version recorded by this build is withdrawn.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import shutil
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable

import duckdb
import jinja2

from grebench import stop
from grebench.scoring import (
    ATTRIBUTION_THRESHOLD,
    CONTAMINATED_NOTE,
    GAP_MIN_PAPERS,
    INCOMPLETE_NOTE,
    board_findings,
    board_floors,
    format_p,
    headline_first,
    provenance,
    rank_range,
    rank_word,
    sample_facts,
    sealed_gap,
)
from grebench.settings import Settings, StageInputs
from grebench.site import _data, _versions
from grebench.site._archives import publish_archives
from grebench.site._board_plot import board_alt, board_svg
from grebench.site._cite import Colophon, colophon
from grebench.site._data import SnapshotListing
from grebench.site._labels import Labels, board_id, board_key_label, human_size
from grebench.site._plots import history_alt, history_svg
from grebench.site._reviewtext import inline_html, review_html
from grebench.site._timeline import board_histories
from grebench.store import ARCHIVE_FORMAT, Provenance, Store, code_files, fingerprint, naming_path, utcnow
from grebench.submissions import REASON_CLASSES, held_submissions, submission_log

SCHEMA_VERSION = 1
#: Fields of one row in leaderboard.json, in order (a stable contract: docs/site.md).
ROW_FIELDS = ("rank", "status", "candidate", "kind", "score", "ci90_low", "ci90_high", "ci95_low", "ci95_high",
              "rank_low", "rank_high", "papers", "pairs", "clean_papers", "sealed_share", "diff_vs_human", "p_vs_human",
              "cost_usd", "latency_s", "vouched", "complete", "due_papers", "missing_papers", "style_controlled",
              "vs_floor", "variants_scored")
_HERE = Path(__file__).parent
log = logging.getLogger(__name__)


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "—" if not math.isfinite(x) else f"{x:.{digits}f}"


def _pct(value: Any) -> str:
    text = _num(None if value is None else float(value) * 100, 0)
    return text if text == "—" else f"{text}%"


def _day(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, (datetime, date)):
        return value.isoformat()[:10]
    return str(value)[:10]


def environment(labels: Labels | None = None, foot: Colophon | None = None) -> jinja2.Environment:
    """The Jinja2 environment: autoescape always on, undefined names are errors; ids are named by ``labels``; every
    page's foot says ``foot`` (default: :func:`grebench.site._cite.colophon` of the default settings)."""
    words = labels or Labels()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, pct=_pct, day=_day, size=human_size, venue_label=words.venue,
                       board_key_label=lambda key: board_key_label(words, key), metric_label=words.metric,
                       estimator_label=words.estimator,
                       preprocessor_label=words.preprocessor, board_title=words.board_title, board_id=board_id,
                       rank_range=lambda row: rank_range(row) or "—",
                       p_vs_human=lambda row: format_p(row.get("p_vs_human"), row.get("papers")),
                       p_value=lambda row: format_p(row.get("p"), row.get("n_papers")),
                       findings=board_findings, review_html=review_html,
                       inline_html=inline_html)
    env.globals.update(setup_label=words.setup, contaminated_note=CONTAMINATED_NOTE, incomplete_note=INCOMPLETE_NOTE,
                       attribution_threshold=ATTRIBUTION_THRESHOLD, board_alt=board_alt,
                       colophon=foot or colophon())
    return env


def _clean(value: Any) -> Any:
    if isinstance(value, dict):  # the style-controlled view's nested values
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def leaderboard_json(boards: list[dict[str, Any]], generated_at: datetime,
                     provenance: Provenance | None = None) -> dict[str, Any]:
    """The machine-readable leaderboard (schema documented in docs/site.md): boards in headline order (``boards[0]``
    is the headline board when ``headline`` is true), each with its ``sample`` and whether it is a ``proxy``; a row's
    ``status`` is ``ranked``, ``incomplete``, ``contaminated`` or ``reference`` (the word the pages use), its
    ``style_controlled`` the style-controlled view's score with its CI, its ``vs_floor`` the paired test against
    each floor control, the board's ``style_control`` the fit (:class:`grebench.scoring.StyleControl`) and its
    ``findings`` what it can tell in words (:func:`grebench.scoring.board_findings`); ``provenance`` says what
    produced them (:func:`grebench.scoring.provenance`)."""
    out = []
    for i, b in enumerate(boards):
        band = b.get("human_band")
        facts = sample_facts(b)
        out.append({
            "venue_id": b["venue_id"], "venue": b["venue"], "metric": b["metric"], "estimator": b["estimator"],
            "preprocessor": b["preprocessor"], "headline": i == 0,
            "proxy": bool(b.get("proxy")),
            "sample": {k: facts[k] for k in ("text", "papers", "eligible", "sampled", "seed")},
            "human_band": None if band is None else {k: _clean(v) for k, v in band.items()},
            "style_control": _clean(b.get("style_control")),
            "findings": board_findings(b["rows"]),
            "rows": [{f: _clean(_row_status(r) if f == "status" else r.get(f)) for f in ROW_FIELDS}
                     for r in b["rows"]],
        })
    return {"schema_version": SCHEMA_VERSION, "generated_at": generated_at.isoformat(), "boards": out,
            "provenance": provenance}


def _row_status(row: dict[str, Any]) -> str:
    return rank_word(row) or "ranked"


def publish_snapshots(source: Path, target: Path, archives: Path | None = None,
                      archive_max_bytes: int = 0) -> list[SnapshotListing]:
    """Put every snapshot file under ``target`` (the site's ``snapshots/``), hard-linked where the file system
    allows (snapshots are frozen: a re-cut replaces files by rename, so a link never changes under a reader), copied
    otherwise; the listing of :func:`grebench.site._data.snapshot_files`, each entry with its site-relative ``href``.
    Only regular files are published (a symbolic link in the snapshots folder is skipped, never followed).  With
    ``archives`` (the cache folder), each snapshot's one-file download ``FOLDER.tar.gz`` too
    (:func:`grebench.site._archives.publish_archives`), listed with ``archive: True``."""
    files: list[SnapshotListing] = []
    for f in _data.snapshot_files(source):
        src = source / f["name"]
        if src.is_symlink() or not src.is_file():
            continue
        dst = target / f["name"]
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            dst.hardlink_to(src)
        except OSError:
            shutil.copy2(src, dst)
        files.append({**f, "href": f"snapshots/{f['name']}"})
    if archives is not None:
        files += [{**a, "href": f"snapshots/{a['name']}"}
                  for a in publish_archives(source, target, archives, archive_max_bytes)]
    return files


class _Writer:
    def __init__(self, out: Path, env: jinja2.Environment, built_at: str) -> None:
        self.out, self.env, self.built_at, self.pages = out, env, built_at, 0

    def page(self, rel: str, template: str, **context: Any) -> None:
        stop.check()  # a page is the site's request boundary: a stop ends the build within one page
        depth = rel.count("/")
        html = self.env.get_template(template).render(root="../" * depth, built_at=self.built_at, **context)
        target = self.out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(html, encoding="utf-8")
        self.pages += 1


#: Bump when what the site shows changes (code, not data): the next build renders again.
SITE_VERSION = "site-v19"  # v6: snapshots published; boards in headline order; v7: incomplete rows marked;
# v8: board versions; v9: board history of a replay; v10: provenance (leaderboard.json and the board pages);
# v11: rank intervals in the history plot, the history beside every board
# v12: per-line attribution (paper pages, board rows); v13: the history plot from the board versions
# v14: contestants before folded controls, the redesigned headline figure, snapshot archives, labels (issue 50)
# v15: the style-controlled view (a column beside the score, the board's coefficients; issue 63)
# v16: the human baseline a reference line, what a board can tell (floor tests, findings), compare pages (issue 63)
# v17: accessibility (issue 63): boards scroll in a focusable region with a cue, headers never break inside a word,
# reviews rendered as markdown without prompt delimiters, models listed before controls
# v18: the public submissions log (submissions.html) and "best of N" beside a submitted model (issue 63)
# v19: the approval of declared cutoffs on submissions.html: each submitted model's state, its sealed-gap and
# information shift tests with their p, a hold's evidence (issue 62)
_READ = ("papers", "paper_texts", "reviews", "review_versions", "candidates", "generations", "scores", "judgments",
         "panel_votes", "panel_verdicts", "panel_rankings", "panel_agreement", "judge_exams", "board_changes",
         "boards", "board_rows", "labels", "paper_links", "paper_link_flags", "scored_setups",
         "line_attribution", "submissions", "submission_log")


#: The site stage's declaration: ``snapshot_archive_max_mb`` decides which snapshots are offered as one download
#: (an input); ``data_dir`` (where the snapshots, their archives and the app's exports live: the snapshots' files
#: are in the fingerprint by content) and ``site_dir`` (where the site is written: the stage's scope) change no page.
#: the foot of every page (:mod:`._cite`) shows the site_* settings: they are inputs like the archive size
SITE_INPUTS = StageInputs(("snapshot_archive_max_mb", "site_contact", "site_source_url", "site_data_licence"),
                          operational=("data_dir", "site_dir"))


def site_fingerprint(store: Store, settings: Settings) -> str:
    """Hash of everything the site shows: the tables it reads, snapshots on disk, templates, the declared settings
    (:data:`SITE_INPUTS`), version."""
    queries: dict[str, tuple[str, list[Any]]] = {}
    if _data.has_table(store, "validation_reports"):  # a new report per run: only the latest per setup is shown
        queries["validation"] = ("""SELECT count(*), bit_xor(hash(estimator, preprocessor, rows_json,
                                        created_at::DATE)) FROM (SELECT * FROM validation_reports
                   QUALIFY row_number() OVER (PARTITION BY estimator, preprocessor ORDER BY created_at DESC) = 1)""",
                                 [])
    if _data.has_table(store, "board_versions") and "origin" in store.columns("board_versions"):
        # versions a snapshot brought change the history plots; the site's own publishes follow from its inputs
        queries["imported_versions"] = ("SELECT count(*), bit_xor(hash(version_id)) FROM board_versions "
                                        "WHERE origin <> 'site'", [])
    snapshots = [(f["name"], f["bytes"], f["sha256"]) for f in _data.snapshot_files(settings.snapshots_path)]
    return fingerprint(store, tables=_READ, queries=queries,
                       values=[SITE_VERSION, SCHEMA_VERSION, snapshots, provenance(store), ARCHIVE_FORMAT,
                               settings.inputs(SITE_INPUTS)],
                       code=code_files(_HERE / "_build.py", _HERE / "_data.py", _HERE / "_plots.py",
                                       _HERE / "_board_plot.py", _HERE / "_archives.py", _HERE / "_cite.py",
                                       _HERE / "_labels.py", _HERE / "_versions.py", _HERE / "_changes.py",
                                       _HERE / "_timeline.py", _HERE / "templates", _HERE / "static",
                                       Path(inspect.getfile(submission_log)), Path(inspect.getfile(sealed_gap)),
                                       Path(inspect.getfile(held_submissions))))


def build_site(store: Store, settings: Settings, out_dir: Path | None = None, *,
               publish: bool = True, before_swap: Callable[[], object] | None = None) -> dict[str, Any]:
    """Render the whole site from the store into ``out_dir`` (default ``settings.site_path``); return a summary.

    The site shows only what earlier stages stored (boards, validation reports, panel results); it computes no
    score.  With ``publish`` the boards are recorded as a board version (a new one only when they changed:
    :func:`grebench.site.publish_version`); without it (a build from the published export while a writer holds the
    store) the latest stored version is shown.  Every version gets its page under ``versions/``.  Built into a
    temporary sibling directory and swapped in.  Skipping an unchanged rebuild is the pipeline's job
    (:class:`grebench.pipeline.SiteStage` compares :func:`site_fingerprint`).

    A build is whole or nothing: the version it publishes is committed only once every page is written and
    ``before_swap`` (the export the app reads: :class:`grebench.pipeline.SiteStage`) has run, just before the new
    folder is swapped in; a failure (a full disk) rolls the version back and removes the half-built folder.
    """
    out = Path(out_dir) if out_dir is not None else settings.site_path
    if not publish:
        return _build(store, settings, out, publish, before_swap)

    def commit() -> None:
        if before_swap is not None:
            before_swap()
        store.con.execute("COMMIT")
        committed.append(True)

    committed: list[bool] = []
    store.con.execute("BEGIN TRANSACTION")
    try:
        return _build(store, settings, out, publish, commit)
    except BaseException:
        if not committed:
            try:
                store.con.execute("ROLLBACK")
            except duckdb.Error:  # a connection a full disk invalidated has nothing to roll back
                pass
        raise


def site_intact(out: Path, summary: dict[str, Any]) -> bool:
    """Whether a build's output is still in ``out`` as that build left it."""
    return (out / "index.html").is_file() and \
        _sha256(out / "leaderboard.json") == summary.get("leaderboard_json_sha256")


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _build(store: Store, settings: Settings, out: Path, publish: bool,
           before_swap: Callable[[], object] | None = None) -> dict[str, Any]:
    tmp = out.with_name(out.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        with naming_path(tmp):  # a page's write error names no file: say the folder
            tmp.mkdir(parents=True)
            snapshots = publish_snapshots(settings.snapshots_path, tmp / "snapshots", settings.snapshot_archives_path,
                                          settings.service.snapshot_archive_max_mb * 2**20)
            summary = _render(store, snapshots, colophon(settings.site), out, tmp, publish)
        if before_swap is not None:
            before_swap()
        _swap(tmp, out)
    except BaseException:  # a failed build leaves nothing behind (the folder held 2.5 MB at its failure)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


def _swap(tmp: Path, out: Path) -> None:
    """Put the built folder in place of ``out`` (renames only); a failure puts the previous site back."""
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(out)
        return
    old = out.with_name(out.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _render(store: Store, snapshots: list[SnapshotListing], foot: Colophon, out: Path, tmp: Path,
            publish: bool) -> dict[str, object]:
    now = utcnow().replace(microsecond=0)
    env = environment(Labels.load(store), foot)
    writer = _Writer(tmp, env, now.isoformat() + "Z")
    shutil.copytree(_HERE / "static", tmp / "static")

    labels = Labels.load(store)
    boards = headline_first(_data.boards(store), labels.is_proxy)  # the headline board first (GEM-S, a real LM)
    venues = _data.venues(store)
    cands = _data.candidates(store)
    prov = provenance(store)
    (tmp / "boards").mkdir(parents=True, exist_ok=True)
    payload = leaderboard_json(boards, now, prov)
    latest = _versions.publish_version(store, payload, utcnow(), env) if publish else _versions.version(store)
    histories = _write_histories(store, boards, tmp / "boards")  # after the publish: the plot ends at this version
    # compare pages: pairs of the headline board's contestants, and each against the references (issue 63 §4)
    headline = boards[0] if boards else None
    compares = _data.compare_pages(store, headline, list(board_floors())) if headline is not None else []
    for c in compares:
        writer.page(f"compare/{c['slug']}.html", "compare.html", c=c, board=headline)
    if compares:
        writer.page("compare/index.html", "compare_index.html", compares=compares, board=headline)
    with_pair: dict[str, list[_data.ComparePage]] = {}
    for c in compares:
        with_pair.setdefault(c["a"]["name"], []).append(c)
        with_pair.setdefault(c["b"]["name"], []).append(c)
    for b in boards:
        writer.page(f"boards/{b['slug']}.html", "leaderboard.html", board=b, prov=prov, histories=histories,
                    compares=compares if b is headline else [])
        (tmp / "boards" / f"{b['slug']}.svg").write_text(board_svg(b, "wide"), encoding="utf-8")
        (tmp / "boards" / f"{b['slug']}-narrow.svg").write_text(board_svg(b, "narrow"), encoding="utf-8")
    writer.page("index.html", "index.html", venues=venues, boards_by_venue=_data.group_by(boards, "venue_id"),
                candidates=cands, version=latest, histories=histories)
    names = {c["name"] for c in cands} | {r["candidate"] for b in boards for r in b["rows"]}
    for name in sorted(names):
        writer.page(f"models/{_data.slug(name)}.html", "model.html", m=_data.model_page(store, name, boards),
                    compares=with_pair.get(name, []), headline=headline)
    papers = _data.paper_ids(store)
    writer.page("papers.html", "papers.html", papers=papers)
    pages = _data.paper_pages(store)
    for p in papers:
        writer.page(f"papers/{p['slug']}.html", "paper.html", p=pages.get(p["paper_id"], {}))
    writer.page("methodology.html", "methodology.html", m=_data.methodology(store))
    log_groups = _data.submissions_log(store)
    writer.page("submissions.html", "submissions.html", groups=log_groups, reason_classes=REASON_CLASSES,
                tries=sum(len(g["entries"]) for g in log_groups), approvals=_data.submission_approvals(store),
                gap_min_papers=GAP_MIN_PAPERS)

    listed = _write_versions(store, tmp / _versions.VERSIONS_DIR)
    writer.pages += len(listed)
    writer.page(f"{_versions.VERSIONS_DIR}/index.html", "versions.html", versions=listed)
    # the stable URL serves the latest version's own bytes (an export from before versions: the boards as built)
    blob = (latest["leaderboard_json"] if latest is not None else
            json.dumps(payload, indent=2, ensure_ascii=False, default=str)).encode("utf-8")
    (tmp / "leaderboard.json").write_bytes(blob)
    manifests = _data.snapshot_manifests(snapshots)
    in_snapshot = {f["name"] for m in manifests for f in m["files"]}
    writer.page("downloads.html", "downloads.html", manifests=manifests,
                loose=[f for f in snapshots if f["name"] not in in_snapshot and not f.get("archive")],
                changes=_data.changelog(store), json_bytes=len(blob), json_sha256=hashlib.sha256(blob).hexdigest(),
                schema_version=SCHEMA_VERSION, versions=listed)

    return {"out": str(out), "pages": writer.pages, "boards": len(boards), "models": len(names),
            "compares": len(compares),
            "papers": len(papers), "leaderboard_json_sha256": hashlib.sha256(blob).hexdigest(),
            "version": None if latest is None else latest["version_id"], "versions": len(listed)}


def _write_histories(store: Store, boards: list[dict[str, Any]], target: Path) -> dict[str, str]:
    """``boards/<slug>-history.svg`` for each board published in at least two board versions (by ``serve``,
    ``run``, a replay or a snapshot: :mod:`grebench.site._timeline`); slug → the figure's alt text (its values)."""
    histories = board_histories(store)
    done = {}
    for b in boards:
        stop.check()
        if b["board_id"] in histories:
            rows = histories[b["board_id"]]
            (target / f"{b['slug']}-history.svg").write_text(history_svg(rows), encoding="utf-8")
            done[b["slug"]] = history_alt(rows, str(b.get("title") or b["metric"]))
    return done


def _write_versions(store: Store, target: Path) -> list[_versions.VersionListing]:
    """Every stored version's page and leaderboard.json, written verbatim (the bytes it was published with);
    the versions newest first."""
    listed = _versions.versions(store)
    for v in listed:
        stop.check()
        text = _versions.version(store, v["version_id"])
        assert text is not None
        folder = target / v["version_id"]
        folder.mkdir(parents=True)
        (folder / "leaderboard.json").write_text(text["leaderboard_json"], encoding="utf-8")
        (folder / "index.html").write_text(text["page_html"], encoding="utf-8")
    return listed
