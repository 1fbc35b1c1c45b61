"""The style-controlled view beside the headline (issue 63 §3) where readers see it: `grebench leaderboard --json`,
leaderboard.json, the board page (a column next to the score, the methodology paragraph, the coefficients table),
the methodology page and the app's Leaderboard tab; the numbers everywhere are the stored board's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli import main
from grebench.scoring import STYLE_FEATURES, stored_boards
from grebench.settings import Settings, load_settings
from grebench.site import build_site
from grebench.site._app_board import HEADERS, board_rows, setup_value
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.site.conftest import fill_store

VENUE = "ICLR.cc/2024/Conference"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Path, dict]:
    """The small store in a data dir, its boards stored (with the view), the site built and the app's export
    written; the stored 2024 board as ``stored_boards`` reads it."""
    root = tmp_path_factory.mktemp("style")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data")})
    store = open_store(settings.db_path)
    fill_store(store)
    site = Path(build_site(store, settings, root / "site")["out"])
    store.export_parquet(settings.export_path)
    board = next(b for b in stored_boards(store) if b["venue_id"] == VENUE)
    store.close()
    return settings, site, board


def test_the_stored_board_has_a_view_for_its_contestants_only(published: tuple[Settings, Path, dict]) -> None:
    _, _, board = published
    rows = {r["candidate"]: r for r in board["rows"]}
    assert set(rows) == {"human", "good-llm", "late-llm", "generic"}
    for name in ("good-llm", "late-llm"):
        view = rows[name]["style_controlled"]
        assert view is not None and view["ci_low"] <= view["score"] <= view["ci_high"]
    assert rows["human"]["style_controlled"] is None and rows["generic"]["style_controlled"] is None
    style = board["style_control"]
    assert style["features"] == list(STYLE_FEATURES) and style["n_rows"] == 6  # 2 contestants x 3 papers
    assert set(style["coefficients"]) == set(STYLE_FEATURES)


def test_leaderboard_json_of_the_cli_and_the_site_carry_the_view(published: tuple[Settings, Path, dict]) -> None:
    settings, site, board = published
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(settings.data_path)}
    result = CliRunner().invoke(main, ["leaderboard", "--venue", VENUE, "--json"], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    [shown] = payload["boards"]
    assert set(shown["style_control"]) >= {"features", "coefficients", "feature_means", "feature_sds", "n_rows",
                                           "method"}
    assert shown["style_control"]["n_rows"] == board["style_control"]["n_rows"]
    cli_rows = {r["candidate"]: r for r in payload["rows"]}
    stored = {r["candidate"]: r for r in board["rows"]}
    assert cli_rows["good-llm"]["style_controlled"] == pytest.approx(stored["good-llm"]["style_controlled"])
    assert set(cli_rows["good-llm"]["style_controlled"]) == {"score", "ci_low", "ci_high"}
    assert cli_rows["human"]["style_controlled"] is None

    data = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    site_board = next(b for b in data["boards"] if b["venue_id"] == VENUE)
    assert site_board["style_control"]["coefficients"].keys() == set(STYLE_FEATURES)
    site_rows = {r["candidate"]: r for r in site_board["rows"]}
    assert site_rows["late-llm"]["style_controlled"] == pytest.approx(stored["late-llm"]["style_controlled"])
    assert site_rows["generic"]["style_controlled"] is None


def test_the_board_page_shows_the_column_next_to_the_score(published: tuple[Settings, Path, dict]) -> None:
    _, site, board = published
    page = BeautifulSoup((site / "boards" / f"{board['board_id']}.html").read_text(encoding="utf-8"), "html.parser")
    table = page.select_one("table.board.contestants")
    headers = [th.get_text(strip=True) for th in table.select("thead th")]
    assert headers[headers.index("Score") + 1] == "Style-controlled"
    stored = {r["candidate"]: r for r in board["rows"]}
    for tr in table.select("tbody tr"):
        cells = tr.select("td")
        assert "style-controlled" in cells[headers.index("Style-controlled")]["class"]
        view = stored[tr["data-candidate"]]["style_controlled"]
        cell = tr.select_one("td.style-controlled").get_text(" ", strip=True)
        if view is None:
            assert cell == "—"
        else:
            assert cell.startswith(f"{view['score']:.2f} [{view['ci_low']:.2f},")
    assert page.select_one("table.board.controls td.style-controlled").get_text(strip=True) == "—"
    section = page.select_one("section#style-control")
    assert "intercept" in section.get_text() and "zero style difference" in section.get_text()
    coefficients = {tr["data-feature"]: tr for tr in section.select("table.style-coefficients tbody tr")}
    assert list(coefficients) == list(STYLE_FEATURES)
    sds = board["style_control"]["feature_sds"]
    assert coefficients["length_words"].select("td")[-1].get_text(strip=True) == f"{sds['length_words']:.2f}"
    method = BeautifulSoup((site / "methodology.html").read_text(encoding="utf-8"), "html.parser")
    assert method.select_one("h2#style-control") is not None


def test_the_app_board_shows_the_column(published: tuple[Settings, Path, dict]) -> None:
    settings, _, board = published
    contestants, controls = board_rows(settings, VENUE, "gem-s", setup_value(board), False)
    col = HEADERS.index("Style-controlled Δ vs human")
    assert HEADERS[col - 2] == "Score (nats)" and HEADERS[col + 1] == "Style-controlled 95% CI"
    stored = {r["candidate"]: r for r in board["rows"]}
    shown = {row[1]: row for row in contestants + controls}
    view = stored["good-llm"]["style_controlled"]
    assert shown["good-llm"][col] == pytest.approx(round(view["score"], 3))
    assert shown["good-llm"][col + 1] == f"[{view['ci_low']:.2f}, {view['ci_high']:.2f}]"
    assert shown["human"][col] is None and shown["generic"][col] is None and shown["generic"][col + 1] == ""
