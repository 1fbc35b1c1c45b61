"""Typed settings: each setting is declared once, as a typed attribute of ``Settings``; the data dir's layout is a
set of properties."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from grebench.settings import SETTINGS, Setting, Settings, load_settings


def test_every_setting_is_a_typed_attribute_declared_once() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)) > 60
    settings = load_settings(env={})
    for declared in SETTINGS:
        owner = getattr(settings, declared.section) if declared.section else settings
        attribute = getattr(type(owner), declared.name)
        assert isinstance(attribute, Setting) and attribute is declared
        value = getattr(owner, declared.name)
        assert type(value) is declared.type, declared.name  # the default has the declared type: no call converts
        assert value == declared.default


def test_an_unknown_setting_is_an_error_not_none() -> None:
    settings = load_settings(env={})
    assert not hasattr(Settings, "__getattr__")
    with pytest.raises(AttributeError):
        settings.sed  # type: ignore[attr-defined]  # noqa: B018


def test_values_from_the_environment_come_back_typed(tmp_path: Path) -> None:
    s = load_settings(env={"GREBENCH_SEED": "7", "GREBENCH_FETCH_PDFS": "no", "GREBENCH_LLM_TIMEOUT_S": "2",
                           "GREBENCH_DATA_DIR": str(tmp_path)})
    assert (s.seed, s.ingest.fetch_pdfs, s.limits.llm_timeout_s) == (7, False, 2.0)
    assert type(s.limits.llm_timeout_s) is float and type(s.seed) is int


def test_the_data_dir_layout_is_properties_of_settings(tmp_path: Path) -> None:
    s = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})
    assert s.db_path == tmp_path / "grebench.duckdb"
    assert s.export_path == tmp_path / "export"
    assert s.snapshots_path == tmp_path / "snapshots"
    assert s.snapshot_requests_path == tmp_path / "snapshot-requests.json"
    assert s.queue_path == tmp_path / "queue.duckdb"
    assert s.site_path == tmp_path / "site"
    assert s.models_path == tmp_path / "models" and s.reuse_probes_path == tmp_path / "models" / ".reuse-probes"
    elsewhere = s.replace(models_dir=str(tmp_path / "m"), site_dir=str(tmp_path / "w"))
    assert elsewhere.models_path == tmp_path / "m" and elsewhere.site_path == tmp_path / "w"


def test_mypy_knows_the_type_of_each_setting(tmp_path: Path) -> None:
    """A typo or a wrong type at a call site is a type error (the package itself is checked by CI's mypy run)."""
    mypy = Path(sys.executable).with_name("mypy")
    if not mypy.exists():
        pytest.skip("mypy is not installed next to this interpreter")
    probe = tmp_path / "probe.py"
    probe.write_text("from grebench.settings import load_settings\n"
                     "s = load_settings()\n"
                     "reveal_type(s.seed)\nreveal_type(s.scoring.hf_dtype)\nreveal_type(s.ingest.fetch_pdfs)\n"
                     "s.sed\ns.scoring.estimatr\ns.hf_dtype\n", encoding="utf-8")
    out = subprocess.run([str(mypy), "--no-incremental", "--follow-imports=silent", str(probe)],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1])
    revealed = re.findall(r'Revealed type is "(?:builtins\.)?(\w+)"', out.stdout)
    assert revealed == ["int", "str", "bool"], out.stdout
    assert '"Settings" has no attribute "sed"' in out.stdout, out.stdout
    assert '"ScoringSettings" has no attribute "estimatr"' in out.stdout, out.stdout
    assert '"Settings" has no attribute "hf_dtype"' in out.stdout, out.stdout  # a section's setting is not flat
