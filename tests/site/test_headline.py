"""Issue 27, item 2: the site, the app and `grebench leaderboard` open on the same headline board (GEM-S, the
language model rather than the fast proxy, the latest venue-year), every board says its paper sample, and an
unranked LLM is called by one word everywhere."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli import main
from grebench.scoring import CONTAMINATED, CONTAMINATED_NOTE, compute_boards, headline_board
from grebench.settings import Settings, load_settings
from grebench.site import Labels, build_site
from grebench.site._app import _board_choices
from grebench.site._app_board import board_info, board_rows
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.site.conftest import fill_store
from tests.site.test_labels import HF_ID, OFFLINE_ID, realistic_ids

NOW = datetime(2026, 1, 1)
HEADLINE_TITLE = "GEM-S (abstract) · scored by SmolLM2-135M (hf, float32) · rules preprocessor"
SAMPLE_2024 = "2 of 3 papers, seeded (seed {seed}), stratified by rating"


def headline_store(store: Store, settings: Settings) -> None:
    """The small store as a default run leaves it: GEM and GEM-S, scored by a language model and by the offline
    proxy, on a seeded sample of the papers (2 of 3 in ICLR 2024, all 3 in ICLR 2020), and an LLM whose every
    paper is contaminated (late-llm: cutoff after ICLR 2020's reviews were public, nothing sealed)."""
    realistic_ids(store)
    con = store.con
    con.execute("INSERT INTO scores SELECT * REPLACE ('gem' AS metric) FROM scores")  # 'gem' sorts before 'gem-s'
    for pid in ("p2020_0", "p2020_1", "p2020_2", "p2024_0", "p2024_1", "p2024_2"):
        con.execute("INSERT INTO baseline_splits VALUES (?, ?, '[]', 1, ?)", [pid, f"{pid}_r0", NOW])
    info = json.dumps({"description": "seeded sample of 5 of 6 papers, stratified by venue and rating tercile",
                       "size": 5, "eligible": 6})
    for pid, venue in (("p2020_0", "ICLR.cc/2020/Conference"), ("p2020_1", "ICLR.cc/2020/Conference"),
                       ("p2020_2", "ICLR.cc/2020/Conference"), ("p2024_0", "ICLR.cc/2024/Conference"),
                       ("p2024_1", "ICLR.cc/2024/Conference")):
        con.execute("INSERT INTO paper_samples (venue_id, paper_id, sample_json, created_at) VALUES (?, ?, ?, ?)",
                    [venue, pid, info, NOW])
    con.execute("DELETE FROM scores WHERE paper_id = 'p2024_2'")  # outside the sample: never scored
    con.execute("UPDATE generations SET sealed = false WHERE candidate = 'late-llm'")
    compute_boards(store, settings)


def _settings(root: Path) -> Settings:
    return load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data")})


def test_one_function_picks_the_headline_board(small_store: Store, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    headline_store(small_store, settings)
    from grebench.scoring import stored_boards

    labels = Labels.load(small_store)
    boards = stored_boards(small_store)
    assert len(boards) == 8  # 2 venues x 2 metrics x 2 estimators
    best = headline_board(boards, labels.is_proxy)
    assert (best["metric"], best["estimator"], best["venue_id"]) == ("gem-s", HF_ID, "ICLR.cc/2024/Conference")
    # with only the proxy scored, the proxy's GEM-S board is the headline (never the GEM board)
    proxy_only = [b for b in boards if b["estimator"] == OFFLINE_ID]
    assert headline_board(proxy_only, labels.is_proxy)["metric"] == "gem-s"
    assert headline_board([], labels.is_proxy) is None


def test_the_app_opens_on_the_headline_board_and_says_its_sample(small_store: Store, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    headline_store(small_store, settings)
    venues, metrics, setups, _models, _papers = _board_choices(small_store)
    # what load_choices selects first: the headline board
    assert venues[0] == ("ICLR 2024", "ICLR.cc/2024/Conference")  # in words, valued by the id
    assert metrics[0] == ("GEM-S (abstract)", "gem-s")
    assert setups[0] == ("scored by SmolLM2-135M (hf, float32) · rules preprocessor", f"{HF_ID} / rules-v3")
    assert setups[1][0] == "offline word model (fast proxy) · rules preprocessor"  # reachable, labelled a proxy

    small_store.export_parquet(settings.export_path)
    info = board_info(settings, venues[0][1], "gem-s", setups[0][1], False)
    seed = settings.seed
    assert f"Sample: **{SAMPLE_2024.format(seed=seed)}**." in info and HEADLINE_TITLE in info
    proxy_info = board_info(settings, venues[0][1], "gem-s", setups[1][1], False)
    assert "fast proxy" in proxy_info and "not the headline result" in proxy_info
    # ICLR 2020: late-llm has no clean paper; its rank cell and the note use the one word
    contestants, controls = board_rows(settings, "ICLR.cc/2020/Conference", "gem-s", setups[0][1], False)
    rows = {r[1]: r for r in contestants + controls}
    assert rows["late-llm"][0] == CONTAMINATED and rows["generic"][0] == "reference"
    assert [r[1] for r in controls] == ["generic"] and "generic" not in [r[1] for r in contestants]
    assert "ref" not in [r[0] for r in rows.values()]
    old_info = board_info(settings, "ICLR.cc/2020/Conference", "gem-s", setups[0][1], False)
    assert "Sample: **all 3 papers**." not in old_info  # a run on a sample says so, even where it took every paper
    assert f"3 of 3 papers, seeded (seed {seed})" in old_info and CONTAMINATED_NOTE[1:] in old_info


def test_the_site_opens_on_the_headline_board_and_every_board_says_its_sample(small_store: Store,
                                                                              tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    headline_store(small_store, settings)
    site = Path(build_site(small_store, settings, tmp_path / "site")["out"])
    index = BeautifulSoup((site / "index.html").read_text(encoding="utf-8"), "html.parser")
    first = index.select_one("section.venue")
    assert first.select_one("h2").get_text(strip=True) == "ICLR 2024"
    headline = first.select_one("h3.board-name")
    assert headline.get_text(" ", strip=True).startswith(HEADLINE_TITLE) and headline["title"].split(" · ")[1] == HF_ID
    assert first.select_one("p.sample strong").get_text() == SAMPLE_2024.format(seed=settings.seed)
    items = [li.get_text(" ", strip=True) for li in first.select("ul.boards li")]
    assert items[0].startswith(HEADLINE_TITLE) and "proxy" in items[-1] and "fast proxy" in items[-1]

    pages = list((site / "boards").glob("*.html"))
    assert len(pages) == 8
    for page in pages:
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        sample = soup.select_one("p.sample strong").get_text()
        assert "seeded" in sample and " of 3 papers" in sample, page.name
        assert bool(soup.select_one("p.proxy-note")) == ("fast proxy" in soup.title.get_text())
    old = next(BeautifulSoup(p.read_text(encoding="utf-8"), "html.parser") for p in pages
               if "2020" in p.name and "-gem-s-hf" in p.name)
    late = old.select_one('tr[data-candidate="late-llm"]')
    assert late.select_one("td").get_text(strip=True) == CONTAMINATED
    assert old.select_one("p.contaminated-note").get_text(strip=True) == CONTAMINATED_NOTE
    assert "contaminated · not ranked" not in old.get_text()

    data = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    top = data["boards"][0]
    assert top["headline"] and (top["metric"], top["estimator"], top["venue_id"]) == (
        "gem-s", HF_ID, "ICLR.cc/2024/Conference")
    assert top["sample"] == {"text": SAMPLE_2024.format(seed=settings.seed), "papers": 2, "eligible": 3,
                             "sampled": True, "seed": settings.seed}
    assert not any(b["headline"] for b in data["boards"][1:])
    assert {b["proxy"] for b in data["boards"] if b["estimator"] == OFFLINE_ID} == {True}
    statuses = {r["candidate"]: r["status"] for b in data["boards"] if b["venue_id"].endswith("2020/Conference")
                for r in b["rows"]}
    assert statuses == {"late-llm": CONTAMINATED, "generic": "reference", "human": "reference", "good-llm": "ranked"}


def test_plain_grebench_leaderboard_prints_the_headline_board(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    store = open_store(settings.db_path)
    fill_store(store)
    headline_store(store, settings)
    store.close()
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(settings.data_path)}
    result = CliRunner().invoke(main, ["leaderboard"], env=env)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "several estimators" not in text
    blocks = text.split("\n\n")
    assert blocks[0].splitlines()[0] == f"ICLR 2024 — {HEADLINE_TITLE}"  # the latest venue first
    assert blocks[0].splitlines()[1].startswith(f"sample: {SAMPLE_2024.format(seed=settings.seed)}")
    assert "offline word model (fast proxy)" not in blocks[0] and "offline word model (fast proxy)" in text
    assert "`grebench leaderboard --estimator offline:" in text  # how to reach the proxy's board
    old = next(b for b in blocks if b.startswith(f"ICLR 2020 — {HEADLINE_TITLE}"))
    late = next(line for line in old.splitlines() if " late-llm " in line)
    assert late.lstrip().startswith(f"{CONTAMINATED} ")
    assert CONTAMINATED_NOTE in text
    proxy = CliRunner().invoke(main, ["leaderboard", "--estimator", "offline", "--json"], env=env)
    assert proxy.exit_code == 0, proxy.output
    payload = json.loads(proxy.output)
    assert payload["estimator"] == OFFLINE_ID and payload["other_estimators"] == [HF_ID]
    assert payload["boards"][0]["sample_text"] == SAMPLE_2024.format(seed=settings.seed)
