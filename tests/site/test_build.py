"""The static site rendered from a small store: links resolve, numbers match the store, hostile HTML is inert."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup

import grebench.scoring
from grebench.pipeline import RunOptions, SiteStage, StageContext, run_stages
from grebench.scoring import compute_boards, leaderboard, rank_range
from grebench.settings import Settings, load_settings
from grebench.site import SCHEMA_VERSION, build_site
from grebench.site._build import ROW_FIELDS
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.site.conftest import fill_store, record_history


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One site built from the small store for the read-only tests of this module."""
    root = tmp_path_factory.mktemp("site")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data")})
    snap = settings.data_path / "snapshots" / "iclr2020"
    snap.mkdir(parents=True)
    (snap / "manifest.json").write_text('{"papers": 3}')
    store = open_store(None)
    fill_store(store)
    summary = build_site(store, settings, root / "site")
    store.con.close()
    assert summary["boards"] == 2 and summary["papers"] == 6
    return Path(summary["out"])


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def test_every_relative_link_resolves_and_nothing_is_external(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    # 17 pages (submissions.html among them), the board versions listing and the one version's page, and the
    # headline board's 6 compare pages (good-llm, late-llm: against each other, the human baseline and the floor
    # `generic`; human vs generic) and their index
    assert len(pages) == 26
    checked = 0
    for page in pages:
        soup = _soup(page)
        for tag, attr in (("a", "href"), ("link", "href"), ("script", "src"), ("img", "src")):
            for el in soup.find_all(tag):
                ref = el.get(attr)
                assert ref, f"{page}: <{tag}> without {attr}"
                parts = urlsplit(ref)
                assert not parts.scheme and not parts.netloc and not ref.startswith("/"), f"{page}: {ref}"
                if ref.startswith("#"):  # an anchor of the same page (the skip link, a review): its target exists
                    assert soup.find(id=ref[1:]) is not None, f"{page.relative_to(site)} links to missing {ref}"
                    continue
                target = (page.parent / unquote(parts.path)).resolve()
                assert target.is_file(), f"{page.relative_to(site)} links to missing {ref}"
                checked += 1
    assert checked > 100


def test_board_numbers_match_the_store(site: Path, small_store: Store) -> None:
    """small_store holds the same rows the module's site was built from."""
    data = json.loads((site / "leaderboard.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    board_2024 = next(b for b in data["boards"] if b["venue_id"] == "ICLR.cc/2024/Conference")
    assert list(board_2024["rows"][0]) == list(ROW_FIELDS)
    # independent check: mean over papers of the mean PMI over references, from the rows inserted
    expected = small_store.scalar("""SELECT avg(m) FROM (SELECT avg(s.pmi) AS m FROM scores s JOIN papers p
                                     USING (paper_id) WHERE p.venue_id = 'ICLR.cc/2024/Conference'
                                     AND s.candidate = 'good-llm' GROUP BY s.paper_id)""")
    row = next(r for r in board_2024["rows"] if r["candidate"] == "good-llm")
    assert row["score"] == pytest.approx(expected)
    assert row["cost_usd"] == pytest.approx(0.002) and row["latency_s"] == pytest.approx(1.5)
    # late-llm: cutoff 2021 is after the 2020 reviews: only its sealed paper counts there
    board_2020 = next(b for b in data["boards"] if b["venue_id"] == "ICLR.cc/2020/Conference")
    late = next(r for r in board_2020["rows"] if r["candidate"] == "late-llm")
    assert late["papers"] == 1 and late["sealed_share"] == 1.0
    human = next(r for r in board_2020["rows"] if r["kind"] == "human")
    assert board_2020["human_band"] == {"score": human["score"], "low": human["ci95_low"], "high": human["ci95_high"]}
    # the HTML table shows the same numbers, in rank order, with controls marked
    page = next(p for p in (site / "boards").glob("iclr.cc-2024*.html"))
    rows = _soup(page).select("table.board tbody tr")
    assert [r["data-candidate"] for r in rows] == [r["candidate"] for r in board_2024["rows"]]
    for tr, r in zip(rows, board_2024["rows"], strict=True):
        assert tr.select_one("td.score").get_text(strip=True) == f"{r['score']:.2f}"
    generic = next(tr for tr in rows if tr["data-candidate"] == "generic")
    assert "role-reference" in generic["class"] and "control" in generic.get_text()
    assert page.with_suffix(".svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_store_leaderboard_agrees_on_a_single_venue(small_store: Store, settings: Settings, tmp_path: Path) -> None:
    small_store.con.execute("DELETE FROM scores WHERE paper_id LIKE 'p2024%'")
    compute_boards(small_store, settings)
    build_site(small_store, settings, tmp_path / "one")
    data = json.loads((tmp_path / "one" / "leaderboard.json").read_text())
    assert len(data["boards"]) == 1
    direct = leaderboard(small_store, "gem-s", "offline", "rules", samples=int(settings.scoring.bootstrap_samples),
                         seed=int(settings.seed))
    assert [(r["candidate"], r["score"]) for r in data["boards"][0]["rows"]] == [
        (r["candidate"], r["score"]) for r in direct]


def test_hostile_review_html_is_escaped(site: Path) -> None:
    for page in site.rglob("*.html"):
        soup = _soup(page)
        for script in soup.find_all("script"):
            assert script.get("src", "").endswith("static/sort.js"), f"{page}: injected script"
        assert not soup.find_all(attrs={"onerror": True}), page
    paper = _soup(next((site / "papers").glob("p2020_0-*.html")))
    assert "<script>alert('xss')</script>" in paper.get_text()  # shown as text
    assert "IGNORE ALL PREVIOUS INSTRUCTIONS" in paper.get_text()  # the hidden-text flag is listed
    assert "The reviewer notes p2020_0_r1 <i>x</i>." in paper.get_text()  # judgment lines, escaped


def test_model_paper_methodology_and_downloads_pages(site: Path) -> None:
    model = _soup(next((site / "models").glob("good-llm-*.html"))).get_text(" ", strip=True)
    assert "2019-01-01" in model and "Judgment of good-llm on p2020_0" in model
    assert "Wins Ties Losses" in model
    method = _soup(site / "methodology.html")
    cells = [td.get_text(strip=True) for td in method.select("table.validation td")]
    assert cells[:3] == ["GEM-S (abstract)", "generic", "degradation"] and "-1.37" in cells and "-1.10" in cells
    assert method.select_one("table.validation td")["title"] == "gem-s"  # the metric's id stays on the page
    assert "ref-position" in method.get_text() and "consistency" in method.get_text()
    # issue 35: the measured before/after of the target rule, from the data shipped with the package
    published = json.loads((Path(grebench.scoring.__file__).parent / "data" / "padding_validation.json").read_text())
    tables = method.select("table.padding")
    assert [h.get_text(strip=True) for h in method.select("#padding ~ h3")][:2] == ["ICLR 2026", "ICLR 2020"]
    assert len(tables) == len(published["samples"]) == 2
    for table, sample in zip(tables, published["samples"], strict=True):
        rows = {tr.select("td")[0].get_text(strip=True): [td.get_text(strip=True) for td in tr.select("td")]
                for tr in table.select("tbody tr")}
        hedge = next(r for r in sample["rows"] if r["control"] == "padding-hedge")
        assert rows["padding-hedge"][2] == f"{hedge['before']['d']:.2f}"
        assert rows["padding-hedge"][-1] == hedge["after"]["verdict"] != "rewarded"
        # what the page claims holds in the shipped figures: no padding rewarded, every degradation penalised
        after = {r["control"]: r["after"] for r in sample["rows"]}
        assert all(v["ci_low"] <= 0 and v["verdict"] != "rewarded" for k, v in after.items() if "padding" in k)
        assert {after[r["control"]]["verdict"] for r in sample["rows"] if r["kind"] == "degradation"} == {"penalised"}
    assert "Spearman ρ 0.978" in method.get_text() and "Spearman ρ 0.953" in method.get_text()
    assert "40 papers of each bundled sample" in method.get_text()
    downloads = _soup(site / "downloads.html").get_text(" ", strip=True)
    digest = hashlib.sha256(b'{"papers": 3}').hexdigest()
    assert "iclr2020/manifest.json" in downloads and digest in downloads
    blob = (site / "leaderboard.json").read_bytes()
    assert hashlib.sha256(blob).hexdigest() in downloads and "first board" in downloads


def test_empty_store_builds_and_rebuild_replaces(settings: Settings, tmp_path: Path) -> None:
    store = open_store(None)
    out = tmp_path / "site"
    (out / "stale").mkdir(parents=True)
    summary = build_site(store, settings, out)
    assert summary["boards"] == 0 and (out / "index.html").is_file() and not (out / "stale").exists()
    assert "No snapshots yet" in (out / "downloads.html").read_text()
    assert json.loads((out / "leaderboard.json").read_text())["boards"] == []


def _site_stage(store: Store, settings: Settings, out: Path, force: bool = False) -> dict:
    """The site through the pipeline runner (which skips an unchanged rebuild)."""
    ctx = StageContext(store, settings, store.start_run("site", {}), RunOptions(site_dir=str(out), force=force))
    return run_stages(ctx, [SiteStage()]).stages["site"]


def test_unchanged_rebuild_writes_nothing_and_a_change_rebuilds(small_store: Store, settings: Settings,
                                                                  tmp_path: Path) -> None:
    out = tmp_path / "site"
    first = _site_stage(small_store, settings, out)
    assert first["unchanged"] is False
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = _site_stage(small_store, settings, out)
    assert again["unchanged"] is True and again["pages"] == first["pages"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps  # nothing rewritten
    # a change the site shows (a candidate's description) rebuilds it
    small_store.con.execute("UPDATE candidates SET description = 'changed description' WHERE kind = 'human'")
    changed = _site_stage(small_store, settings, out)
    assert changed["unchanged"] is False
    assert "changed description" in "".join(p.read_text() for p in (out / "models").glob("*.html")) + \
        (out / "index.html").read_text()
    # a deleted output is noticed, and force always builds
    (out / "leaderboard.json").unlink()
    assert _site_stage(small_store, settings, out)["unchanged"] is False
    assert _site_stage(small_store, settings, out, force=True)["unchanged"] is False


def test_only_finished_snapshot_files_are_published(tmp_path: Path) -> None:
    from grebench.site._build import publish_snapshots

    source = tmp_path / "snapshots"
    (source / "iclr-2020").mkdir(parents=True)
    (source / "iclr-2020" / "manifest.json").write_text("{}")
    (source / ".iclr-2024.tmp-1a2b3c4d").mkdir()  # a snapshot being cut: not published until renamed
    (source / ".iclr-2024.tmp-1a2b3c4d" / "papers.parquet").write_bytes(b"half")
    (tmp_path / "secret").write_text("not a snapshot")
    (source / "iclr-2020" / "link.parquet").symlink_to(tmp_path / "secret")  # never followed
    files = publish_snapshots(source, tmp_path / "site" / "snapshots")
    assert [(f["name"], f["href"]) for f in files] == [("iclr-2020/manifest.json", "snapshots/iclr-2020/manifest.json")]
    published = sorted(p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*")
                       if p.is_file())
    assert published == ["snapshots/iclr-2020/manifest.json"]


def test_each_board_page_shows_its_rank_intervals_and_its_replay_history(settings: Settings, tmp_path: Path) -> None:
    store = open_store(None)
    fill_store(store)
    plain = Path(build_site(store, settings, tmp_path / "plain")["out"])
    assert not list((plain / "boards").glob("*-history.svg")) and "history" not in (plain / "index.html").read_text()
    record_history(store)
    site = Path(build_site(store, settings, tmp_path / "site")["out"])
    data = json.loads((site / "leaderboard.json").read_text())
    for board in data["boards"]:
        page = site / "boards" / f"{_slug(site, board)}.html"
        soup = _soup(page)
        figure = soup.select_one("figure.history img")
        assert figure is not None, page.name
        assert (page.parent / Path(figure["src"]).name).read_text().lstrip().startswith(("<?xml", "<svg"))
        cells = [tr.select("td")[6].get_text(strip=True) for tr in soup.select("table.board tbody tr")]
        assert cells == [rank_range(r) or "—" for r in board["rows"]]  # rank interval column, from the JSON's rows
        assert any(r["rank_low"] is not None for r in board["rows"])
    svg = next((site / "boards").glob("*-history.svg")).read_text()
    assert "rank (band = 95%" in svg and "(1–" in svg  # the rank panel, the legend's rank intervals
    assert "figure class=\"history\"" in (site / "index.html").read_text()
    store.con.close()


def _slug(site: Path, board: dict) -> str:
    """The page name of a leaderboard.json board (its venue and metric; the small store has one setup)."""
    prefix = board["venue_id"].lower().replace("/", "-")
    return next(p.stem for p in (site / "boards").glob(f"{prefix}-{board['metric']}-*.html"))
