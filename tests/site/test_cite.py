"""Issue 63: every page of the site and the app end with how to cite GRE-bench (BibTeX, the reference of
CITATION.cff), the data's licence, a contact and the source (settings [site])."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from bs4 import BeautifulSoup

import grebench
from grebench.settings import load_settings
from grebench.site import build_site
from grebench.site._app import create_app
from grebench.site._cite import AUTHORS, CODE_LICENCE, TITLE, YEAR, colophon
from grebench.store import export_snapshot, open_store, venue_years
from tests.conftest import FAST_ENV
from tests.site.conftest import (
    chromium,
    exported_app_settings,
    fill_store,
    launch_app,
    record_history,
    requires_chromium,
)

REPO = Path(__file__).resolve().parents[2]
LICENCE = "Reviews: CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/), by their (anonymous) reviewers"
SITE_ENV = {"GREBENCH_SITE_CONTACT": "leaderboard@example.org <maintainers>",
            "GREBENCH_SITE_SOURCE_URL": "https://git.example.org/grebench"}


def test_citation_cff_is_the_reference_the_pages_give() -> None:
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["message"]
    assert cff["title"] == TITLE
    assert cff["authors"] == [{"name": AUTHORS}] == [{"name": a["name"]} for a in project["authors"]]
    assert cff["version"] == project["version"] == grebench.__version__
    assert cff["license"] == project["license"] == CODE_LICENCE
    bibtex = colophon().bibtex
    assert bibtex.startswith("@software{grebench,") and bibtex.count("{") == bibtex.count("}")
    assert f"year = {{{YEAR}}}" in bibtex and f"version = {{{grebench.__version__}}}" in bibtex
    assert "url" not in bibtex  # no source URL set: none is made up


def _foot(page: BeautifulSoup) -> dict[str, str]:
    footer = page.select_one("footer .colophon")
    assert footer is not None, "no foot"
    bibtex = footer.select_one("details.cite pre.bibtex")
    licence = footer.select_one("p.licence")
    source = footer.select_one("p.source a")
    return {"bibtex": bibtex.get_text() if bibtex else "", "tabindex": str(bibtex.get("tabindex")) if bibtex else "",
            "licence": licence.get_text() if licence else "",
            "contact": footer.select_one("p.contact").get_text(),  # type: ignore[union-attr]
            "source": str(source.get("href")) if source else footer.select_one("p.source").get_text()}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site of the filled store with a snapshot and two board versions, contact and source set."""
    root = tmp_path_factory.mktemp("cite")
    settings = load_settings(None, env={**FAST_ENV, **SITE_ENV, "GREBENCH_DATA_DIR": str(root / "data")})
    store = open_store(settings.db_path)
    try:
        fill_store(store)
        record_history(store)
        v = venue_years(store)[0]
        export_snapshot(store, v["venue_id"], settings.snapshots_path / v["slug"])
        yield Path(build_site(store, settings, root / "site")["out"])
    finally:
        store.close()


def test_every_page_of_the_site_ends_with_cite_licence_contact_and_source(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    kinds = {p.relative_to(site).parts[0] for p in pages}
    assert {"index.html", "downloads.html", "methodology.html", "papers.html", "boards", "models", "papers",
            "versions"} <= kinds, kinds
    for page in pages:
        foot = _foot(BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser"))
        where = page.relative_to(site)
        assert foot["bibtex"].startswith("@software{grebench,"), where
        assert foot["tabindex"] == "0", where  # the box scrolls: reachable by keyboard
        assert LICENCE in foot["licence"], where
        if where.parts[0] == "versions" and where.name == "index.html" and len(where.parts) == 3:
            # a version's page is kept as it was published (record_history published these with the defaults)
            assert foot["contact"].startswith("Contact: ") and foot["source"], where
            continue
        assert "url = {https://git.example.org/grebench}" in foot["bibtex"], where
        assert foot["contact"] == "Contact: leaderboard@example.org <maintainers>", where  # escaped, shown as text
        assert foot["source"] == "https://git.example.org/grebench", where


def test_without_settings_the_foot_says_what_is_not_set() -> None:
    page = BeautifulSoup(colophon().html(), "html.parser")
    assert page.select_one("p.contact").get_text() == "Contact: none set by this site's operator."  # type: ignore[union-attr]
    source = page.select_one("p.source")
    assert source is not None and source.a is None and "has set no source URL" in source.get_text()
    odd = load_settings(None, env={"GREBENCH_SITE_SOURCE_URL": "javascript:alert(1)",
                                   "GREBENCH_SITE_CONTACT": "<script>alert(1)</script>"})
    hostile = colophon(odd.site).html()
    assert "<script>" not in hostile and 'href="javascript' not in hostile


def _app_foot(demo: Any) -> BeautifulSoup:
    [html] = [c["props"]["value"] for c in demo.config["components"]
              if c.get("props", {}).get("elem_id") == "colophon"]
    return BeautifulSoup(html, "html.parser")


def test_the_app_has_the_same_foot(tmp_path: Path) -> None:
    settings = exported_app_settings(tmp_path / "data").replace(site_contact="leaderboard@example.org <maintainers>",
                                                                site_source_url="https://git.example.org/grebench")
    demo = create_app(settings, resolver={})
    try:
        foot = _foot(_app_foot(demo))
    finally:
        demo.close()
    assert foot["bibtex"] == colophon(settings.site).bibtex
    assert LICENCE in foot["licence"]
    assert foot["contact"] == "Contact: leaderboard@example.org <maintainers>"
    assert foot["source"] == "https://git.example.org/grebench"


@requires_chromium
def test_the_apps_page_shows_the_foot_in_chromium(tmp_path: Path) -> None:
    settings = exported_app_settings(tmp_path / "data")
    demo = create_app(settings, resolver={})
    try:
        url = launch_app(demo, settings)
        result = chromium(url, "--dump-dom", profile=tmp_path / "profile")
    finally:
        demo.close()
    assert result.returncode == 0, result.stderr[-2000:]
    foot = _foot(BeautifulSoup(result.stdout, "html.parser"))
    assert foot["bibtex"].startswith("@software{grebench,") and "CC BY 4.0" in foot["licence"]
    assert foot["contact"].startswith("Contact:") and "grebench" in foot["source"]
