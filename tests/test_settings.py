"""Settings: defaults, TOML file, environment, errors, and documentation of every setting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grebench.settings import SETTINGS, load_settings

REPO = Path(__file__).resolve().parent.parent


def test_defaults_when_nothing_is_set() -> None:
    s = load_settings(env={})
    assert s.data_dir == "./grebench-data"
    assert s.db_path == Path("grebench-data/grebench.duckdb")
    assert s.site_path == Path("grebench-data/site")


def test_env_overrides_toml_which_overrides_default(tmp_path: Path) -> None:
    cfg = tmp_path / "g.toml"
    cfg.write_text('data_dir = "/from/toml"\nseed = 7\nbootstrap_samples = 10\n'
                   '[[candidates]]\nname = "m"\nkind = "llm"\nmodel = "openai/x"\n')
    s = load_settings(cfg, env={"GREBENCH_SEED": "11"})
    assert s.data_dir == "/from/toml"
    assert s.seed == 11
    assert s.scoring.bootstrap_samples == 10
    assert s.tables["candidates"][0]["name"] == "m"
    # GREBENCH_CONFIG is used when no path is given
    assert load_settings(env={"GREBENCH_CONFIG": str(cfg)}).seed == 7


def test_bool_and_bad_values_are_reported_with_origin(tmp_path: Path) -> None:
    assert load_settings(env={"GREBENCH_FETCH_PDFS": "off"}).ingest.fetch_pdfs is False
    with pytest.raises(ValueError, match="GREBENCH_SEED: seed must be int"):
        load_settings(env={"GREBENCH_SEED": "many"})
    cfg = tmp_path / "bad.toml"
    cfg.write_text("no_such_setting = 1\n")
    with pytest.raises(ValueError, match="unknown setting 'no_such_setting'"):
        load_settings(cfg, env={})
    cfg.write_text("seed = [unclosed\n")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_settings(cfg, env={})
    with pytest.raises(ValueError, match="config file not found"):
        load_settings(tmp_path / "missing.toml", env={})


def test_replace_coerces_and_rejects_unknown() -> None:
    s = load_settings(env={}).replace(seed="5")
    assert s.seed == 5
    with pytest.raises(KeyError):
        s.replace(nope=1)


def test_every_setting_is_documented() -> None:
    docs = (REPO / "README.md").read_text() + "".join(p.read_text() for p in (REPO / "docs").glob("*.md"))
    documented = set(re.findall(r"`([a-z_0-9]+)`", docs))
    missing = [s.name for s in SETTINGS if s.name not in documented]
    assert not missing, f"settings not documented in README.md or docs/: {missing}"
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)), "a setting is declared twice"
