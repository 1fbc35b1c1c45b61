"""Settings in sections: each setting belongs to one section (or the general ones), read as
``settings.<section>.<name>``; settings files may use the sections' tables or, as files written before sections
existed, the top level; environment variables and options name a setting alone; the reference in
docs/configuration.md is generated from the declarations; every TOML example of the docs loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grebench.settings import (
    GENERAL,
    SECTIONS,
    SETTINGS,
    AppSettings,
    ScoringSettings,
    Section,
    Settings,
    declaration,
    load_settings,
    reference_markdown,
)

REPO = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grebench.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_setting_is_in_one_section_and_read_through_it() -> None:
    settings = load_settings(env={})
    owners: dict[str, str] = {}
    for section in SECTIONS:
        assert issubclass(section, Section) and section.key
        view = getattr(settings, section.key)
        assert type(view) is section  # settings.scoring is a ScoringSettings
        for declared in section.declared():
            assert declared.section == section.key
            owners[declared.name] = section.key
            assert getattr(view, declared.name) == declared.default
            assert not hasattr(Settings, declared.name), f"{declared.name} is readable flat, beside its section"
    for declared in GENERAL:
        assert declared.section == "" and declared.name not in owners
    assert len(owners) + len(GENERAL) == len(SETTINGS) == len({s.name for s in SETTINGS})
    assert len(SECTIONS) >= 7 and all(len(s.declared()) >= 2 for s in SECTIONS)
    assert declaration("estimator") is ScoringSettings.estimator
    with pytest.raises(KeyError, match="unknown setting"):
        declaration("estimatr")
    with pytest.raises(KeyError, match="unknown setting"):
        settings.value("estimatr")


def test_a_section_table_and_the_old_top_level_form_load_the_same(tmp_path: Path) -> None:
    sectioned = load_settings(_write(tmp_path, 'seed = 3\n[scoring]\nestimator = "offline"\nbootstrap_samples = 50\n'
                                     '[app]\napp_port = 8123\n'), env={})
    flat = load_settings(_write(tmp_path, 'seed = 3\nestimator = "offline"\nbootstrap_samples = 50\n'
                                'app_port = 8123\n'), env={})
    assert sectioned.values == flat.values
    assert (sectioned.seed, sectioned.scoring.estimator, sectioned.scoring.bootstrap_samples,
            sectioned.app.app_port) == (3, "offline", 50, 8123)
    # the environment still names a setting alone, and still wins over the file
    env = load_settings(_write(tmp_path, '[app]\napp_port = 8123\n'), env={"GREBENCH_APP_PORT": "9000"})
    assert env.app.app_port == 9000 and isinstance(env.app, AppSettings)
    # replace() (what options use) names a setting alone too, and the section sees the change
    assert env.replace(app_port=9001).app.app_port == 9001


@pytest.mark.parametrize(("text", "words"), [
    ('[app]\nestimator = "offline"\n', "[app] has no setting 'estimator'; estimator goes under [scoring]"),
    ('[scoring]\nseed = 4\n', "seed goes under the top of the file"),
    ('[scoring]\nestimatr = "offline"\n', "did you mean 'estimator'?"),
    ('estimator = "offline"\n[scoring]\nestimator = "hf:smollm2-135m"\n',
     "estimator is set twice (the top of the file and [scoring])"),
    ('[scorng]\nestimator = "offline"\n', "did you mean [scoring]?"),
    ('[grebench]\nestimator = "offline"\n', "estimator under [scoring]"),
    ('[scoring]\nestimator = { a = 1 }\n', "estimator is a setting, not a table"),
    ('[app]\napp_port = 0\n', "app_port = 0 is out of range"),
])
def test_a_misplaced_or_bad_setting_is_refused_with_where_it_goes(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        load_settings(_write(tmp_path, text), env={})
    assert words in str(caught.value)


def test_the_reference_in_the_docs_is_generated_from_the_declarations() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    reference = reference_markdown()
    assert reference in page, "docs/configuration.md is stale: paste the output of `python -m grebench.settings`"
    for section in SECTIONS:
        assert f"### [{section.key}]" in reference
    assert all(f"| `{s.name}` |" in reference for s in SETTINGS)


def _toml_examples() -> list[tuple[str, str]]:
    """Every ```toml block of README.md and docs/*.md that is a settings file (not another package's
    pyproject.toml)."""
    found: list[tuple[str, str]] = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)):
            if re.search(r"^\[(project|tool|build-system)\b", block, re.M):
                continue
            found.append((f"{page.name}#{i + 1}", block))
    return found


EXAMPLES = _toml_examples()


def test_the_docs_have_settings_examples() -> None:
    pages = {name.split("#")[0] for name, _ in EXAMPLES}
    assert {"configuration.md", "candidates.md", "panel.md"} <= pages, pages


@pytest.mark.parametrize(("name", "block"), EXAMPLES, ids=[name for name, _ in EXAMPLES])
def test_every_documented_example_loads(tmp_path: Path, name: str, block: str) -> None:
    """The settings load, and the candidates and judges tables it declares parse, as `grebench` would read them."""
    from grebench.bench import load_candidates
    from grebench.panel import judge_names

    settings = load_settings(_write(tmp_path, block), env={"GREBENCH_DATA_DIR": str(tmp_path / "data")})
    candidates = {c.name for c in load_candidates(settings)}
    for table in settings.tables.get("candidates", []):
        assert table["name"] in candidates, name
    judges = judge_names(settings, local_judges=())
    for table in settings.tables.get("judges", []):
        assert table["name"] in judges, name
