"""What a board can tell, and two contestants side by side (issue 63 §4 and §5), where readers see them: the board
page, leaderboard.json, `grebench leaderboard --json`, the compare pages of the static site and the app's Compare tab.

The small store of tests/site/conftest.py gets two more controls before its boards are computed: `other-paper`
(a floor: good-llm's scores with a wobble, so nothing tells them apart) and `elongation` (just above the human
baseline).  On its 2024 board late-llm scores above the human baseline and good-llm below it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli import main
from grebench.scoring import board_paper_scores, compare_pair, compute_boards, format_p, stored_boards
from grebench.settings import Settings, load_settings
from grebench.site import build_site
from grebench.site._app import _tab_from_query, create_app
from grebench.site._app_board import board_info, board_rows, reader, setup_value
from grebench.site._app_compare import URL_JS, compare_choices, compare_view, parse_compare
from grebench.site._data import compare_slug, slug
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.site.conftest import CANDIDATES, NOW, fill_store

VENUE = "ICLR.cc/2024/Conference"
#: the added controls: name -> PMI offset from good-llm's (other-paper) or the human baseline's (elongation)
WOBBLE = (0.3, -0.3, 0.02)


def _add_control(store: Store, name: str, pmis: dict[str, float]) -> None:
    """A control with one generation per paper, scored ``pmis[paper]`` on each of the paper's references."""
    con = store.con
    con.execute("INSERT INTO candidates (name, kind, model, cutoff, params_json, description, updated_at) "
                "VALUES (?, 'control', NULL, NULL, '{}', ?, ?)", [name, f"about {name}", NOW])
    for pid, pmi in pmis.items():
        gid = f"g_{name}_{pid}"
        con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, status, "
                    "text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', ?, ?, false)",
                    [gid, name, pid, f"{name} review of {pid}", NOW])
        for rid in (f"{pid}_r0", f"{pid}_r1"):
            con.execute("INSERT INTO scores VALUES ('gem-s', 'offline', 'rules', 'p1', ?, ?, ?, ?, ?, ?, ?, 10, ?)",
                        [name, pid, rid, gid, -10.0 + pmi, -10.0, pmi, NOW])


def _good(pid: str) -> float:
    """good-llm's mean PMI on a paper of the small store (its base, +0.1 a paper index, +0.3 for 2024, +0.025 refs)."""
    year, i = pid[1:].split("_")
    return CANDIDATES["good-llm"][2] + 0.1 * int(i) + 0.025 + (0.3 if year == "2024" else 0.0)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("compare")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data")})
    store = open_store(settings.db_path)
    fill_store(store)
    papers = [f"p{year}_{i}" for year in (2020, 2024) for i in range(3)]
    _add_control(store, "other-paper", {p: _good(p) + WOBBLE[int(p[-1])] for p in papers})
    human = CANDIDATES["human"][2]
    _add_control(store, "elongation", {p: _good(p) - CANDIDATES["good-llm"][2] + human + 0.05 for p in papers})
    compute_boards(store, settings)
    site = Path(build_site(store, settings, root / "site")["out"])
    store.export_parquet(settings.export_path)
    board = next(b for b in stored_boards(store) if b["venue_id"] == VENUE)
    board["paper_scores"] = board_paper_scores(store, board)
    store.close()
    return settings, site, board


def _page(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def test_the_human_baseline_is_a_reference_line_and_ranks_count_the_contestants(
        published: tuple[Settings, Path, dict[str, Any]]) -> None:
    _, site, board = published
    rows = {r["candidate"]: r for r in board["rows"]}
    assert rows["human"]["rank"] is None and rows["late-llm"]["rank"] == 1 and rows["good-llm"]["rank"] == 2
    table = _page(site / "boards" / f"{board['board_id']}.html").select_one("table.board.contestants")
    cells = {tr["data-candidate"]: tr.select("td")[0].get_text(strip=True) for tr in table.select("tbody tr")}
    assert cells == {"late-llm": "1", "human": "reference line", "good-llm": "2"}
    # the reference line sits at its score: between the contestant above it and the one below
    assert [tr["data-candidate"] for tr in table.select("tbody tr")] == ["late-llm", "human", "good-llm"]
    data = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    shown = {r["candidate"]: r for r in next(b for b in data["boards"] if b["venue_id"] == VENUE)["rows"]}
    assert shown["human"]["status"] == "reference" and shown["human"]["rank"] is None
    assert shown["good-llm"]["rank"] == 2 and shown["good-llm"]["status"] == "ranked"


def test_a_model_indistinguishable_from_another_paper_s_review_is_said_so(
        published: tuple[Settings, Path, dict[str, Any]]) -> None:
    settings, site, board = published
    page = _page(site / "boards" / f"{board['board_id']}.html")
    # the findings' markdown rendered: a control's name in <code>, no literal backticks on the page
    assert page.select(".findings li code") and not any("`" in li.get_text() for li in page.select(".findings li"))
    said = [li.get_text("", strip=False).strip() for li in page.select(".findings li")]
    good = [s for s in said if s.startswith("good-llm ")]
    assert any("cannot be told apart from a review of another paper (other-paper)" in s for s in good)
    assert any(s.startswith("Control elongation") and "scores above the human baseline" in s for s in said)
    assert not any("generic" in s and "above the human baseline" in s for s in said)
    # the JSON flag, in leaderboard.json and in `grebench leaderboard --json`
    data = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    site_board = next(b for b in data["boards"] if b["venue_id"] == VENUE)
    site_rows = {r["candidate"]: r for r in site_board["rows"]}
    assert site_rows["good-llm"]["vs_floor"]["other-paper"]["distinguishable"] is False
    assert set(site_rows["good-llm"]["vs_floor"]) == {"other-paper", "generic"}
    assert site_rows["generic"]["vs_floor"] is None
    assert any("`other-paper`" in f for f in site_board["findings"])
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(settings.data_path)}
    result = CliRunner().invoke(main, ["leaderboard", "--venue", VENUE, "--json"], env=env)
    assert result.exit_code == 0, result.output
    cli_rows = {r["candidate"]: r for r in json.loads(result.output)["rows"]}
    floor = cli_rows["good-llm"]["vs_floor"]["other-paper"]
    assert set(floor) == {"diff", "p", "papers", "distinguishable"} and floor["distinguishable"] is False
    assert floor["papers"] == 3 and floor["p"] == pytest.approx(board["rows"][2]["vs_floor"]["other-paper"]["p"])
    assert cli_rows["human"]["status"] == "reference" and cli_rows["human"]["rank"] is None
    text = CliRunner().invoke(main, ["leaderboard", "--venue", VENUE], env=env).output
    assert "note: good-llm" in text and "`other-paper`" in text


def _resolves(site: Path, page: Path, href: str) -> bool:
    """Whether a relative link of ``page`` names an existing page (and, with a fragment, an element of it)."""
    path, _, fragment = href.partition("#")
    target = (page.parent / path).resolve()
    if not target.is_file() or site.resolve() not in target.parents:
        return False
    return not fragment or _page(target).find(id=fragment) is not None


def test_a_compare_page_shows_the_paired_test_and_the_papers_that_differ_most(
        published: tuple[Settings, Path, dict[str, Any]]) -> None:
    _, site, board = published
    path = site / "compare" / f"{compare_slug('late-llm', 'good-llm')}.html"
    assert path.is_file()
    page = _page(path)
    expected = compare_pair("late-llm", "good-llm", board["paper_scores"], samples=board["bootstrap_samples"],
                            seed=board["seed"])
    test = page.select_one("section#paired-test")
    assert test.select_one(".p").get_text(strip=True) == format_p(expected["p"], expected["papers"])
    assert test.select_one(".diff").get_text(strip=True) == f"{expected['diff']:+.2f}"
    assert "sign-flip" in test.get_text() and test.select_one(".papers").get_text(strip=True) == "3"
    rows = page.select("table.compare-papers tbody tr")
    assert [tr["data-paper"] for tr in rows] == [t["paper_id"] for t in expected["top"]]
    links = [a["href"] for tr in rows for a in tr.select("a")]
    assert any(h.endswith(f"#gen-{slug('late-llm')}") for h in links)
    assert any(h.endswith(f"#gen-{slug('good-llm')}") for h in links)
    for href in links + [a["href"] for a in page.select("h1 a")]:
        assert _resolves(site, path, href), href
    # the pairs: every pair of contestants, each against the human baseline and the floor controls, not elongation
    names = {p.name for p in (site / "compare").glob("*.html")} - {"index.html"}
    assert f"{compare_slug('good-llm', 'other-paper')}.html" in names
    assert f"{compare_slug('late-llm', 'human')}.html" in names and f"{compare_slug('human', 'generic')}.html" in names
    assert not any(slug("elongation") in n for n in names)


def test_the_board_and_model_pages_link_the_compare_pages(published: tuple[Settings, Path, dict[str, Any]]) -> None:
    _, site, board = published
    index = site / "index.html"
    data = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    assert data["boards"][0]["venue_id"] == VENUE  # the headline board: ICLR 2024, the latest venue
    headline = site / "boards" / f"{board['board_id']}.html"
    boards = [p for p in (site / "boards").glob("*.html") if _page(p).select_one("details.compare-picker")]
    assert boards == [headline]
    picker = [a["href"] for a in _page(headline).select("details.compare-picker a")]
    assert len(picker) > 3 and all(_resolves(site, headline, h) for h in picker)
    model = site / "models" / f"{slug('good-llm')}.html"
    links = [a["href"] for a in _page(model).select("ul.compare-links a")]
    assert f"../compare/{compare_slug('good-llm', 'other-paper')}.html" in links
    assert all(_resolves(site, model, h) for h in links)
    assert index.is_file()


def test_the_app_board_says_what_it_can_tell(published: tuple[Settings, Path, dict[str, Any]]) -> None:
    settings, _, board = published
    info = board_info(settings, VENUE, "gem-s", setup_value(board), False)
    assert "What this board can tell" in info and "- good-llm" in info and "(`other-paper`)" in info
    contestants, _ = board_rows(settings, VENUE, "gem-s", setup_value(board), False)
    assert {row[1]: row[0] for row in contestants} == {"late-llm": "1", "human": "reference", "good-llm": "2"}


def test_the_app_compare_view_reads_the_query(published: tuple[Settings, Path, dict[str, Any]]) -> None:
    settings, _, board = published
    cache = reader(settings)
    assert parse_compare("good-llm,human") == ("good-llm", "human") and parse_compare("") == (None, None)
    assert compare_choices(cache) == ["late-llm", "human", "good-llm", "other-paper", "generic"]
    demo = create_app(settings, resolver={})
    try:
        load = next(f.fn for f in demo.fns.values() if f.name == "load_compare")
        request = SimpleNamespace(query_params={"compare": "good-llm,other-paper"})
        a, b, text, rows = load(request)
        assert a["value"] == "good-llm" and b["value"] == "other-paper"
        expected = compare_pair("good-llm", "other-paper", board["paper_scores"])
        assert format_p(expected["p"], 3) in text and "cannot tell them apart" in text
        assert [r[1] for r in rows] == [t["paper_id"] for t in expected["top"]]
        # no query, or a name not on the board: the board's first two rows
        assert load(SimpleNamespace(query_params={}))[:2][0]["value"] == "late-llm"
        assert load(SimpleNamespace(query_params={"compare": "nobody,human"}))[1]["value"] == "human"
        # ?compare= opens the Compare tab; the view itself answers a change of the dropdowns
        assert _tab_from_query(SimpleNamespace(query_params={"compare": "a,b"})).selected == "compare"
        assert compare_view(cache, "good-llm", "good-llm")[1] == []
        rest = next(f.fn for f in demo.fns.values() if f.name == "load_rest")
        assert rest(SimpleNamespace(query_params={"paper": "p2024_1"}, client=None, headers={}))[1]["value"] == \
            "p2024_1"
    finally:
        demo.close()
    # a change of either dropdown writes the pair into the page's address (so the comparison can be linked)
    assert re.search(r"searchParams\.set\(\"compare\"", URL_JS) and "history.replaceState" in URL_JS
