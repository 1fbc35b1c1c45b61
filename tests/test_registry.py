"""Registries: one place that resolves spec strings, refuses duplicates, and loads plugins without failing on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.registry import Registry, UnknownPart


def make_one(arg: str) -> str:
    return f"one({arg})"


def test_resolve_splits_name_and_argument_once() -> None:
    reg: Registry[object] = Registry("widget")
    reg.add("one", make_one, spec="one:ARG")
    entry, arg = reg.resolve("one:https://x.example:8000/v1")
    assert entry.name == "one" and arg == "https://x.example:8000/v1"  # only the first colon splits
    assert reg.resolve(" one ")[1] == ""
    with pytest.raises(UnknownPart, match=r"unknown widget 'two' \(known: one:ARG\)"):
        reg.resolve("two:x")


def test_a_name_registered_twice_from_elsewhere_is_refused() -> None:
    reg: Registry[object] = Registry("widget")
    reg.add("one", make_one)
    reg.add("one", make_one)  # the same module again (a reload) is fine
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("one", os.path.join)  # another module's object under a taken name
    with pytest.raises(ValueError, match="without ':'"):
        reg.add("a:b", make_one)


def test_a_broken_plugin_is_reported_and_the_rest_works(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "broken_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "broken_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\n"
                                                                   "Version: 0.1\n")
    (site / "broken_plugin-0.1.dist-info" / "entry_points.txt").write_text("[grebench]\nbroken = broken_plugin\n")
    (site / "broken_plugin.py").write_text("raise RuntimeError('plugin bug')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(Path(__file__).parents[1])])}
    code = ("from grebench.registry import load_plugins\nfrom grebench.scoring.estimators import ESTIMATORS\n"
            "print(ESTIMATORS.names()); print(load_plugins())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "'offline'" in out.stdout and "RuntimeError: plugin bug" in out.stdout


def test_settings_naming_an_unregistered_part_are_refused_before_any_work(tmp_path: Path) -> None:
    runner = CliRunner()
    for env, message in (({"GREBENCH_ESTIMATOR": "hf2:/x"}, "unknown estimator 'hf2'"),
                         ({"GREBENCH_PREPROCESSOR": "rulez"}, "unknown preprocessor 'rulez'"),
                         ({"GREBENCH_VENUES": "bundled,archiv:/x.jsonl"}, "unknown source 'archiv'")):
        result = runner.invoke(main, ["--data-dir", str(tmp_path / "d"), "stats"], env=env)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not (tmp_path / "d").exists()


def test_a_misspelt_registration_fact_fails_at_registration() -> None:
    """A keyword that is not a field of the registry's facts is refused where the part registers, naming the
    closest fact, instead of being stored and never read (issue 49)."""
    from grebench.scoring.estimators import ESTIMATORS, EstimatorInfo

    reg: Registry[object] = Registry("estimator", facts=EstimatorInfo)
    reg.add("good", make_one, local_model=True, proxy=False)
    assert reg.get("good").facts(EstimatorInfo).local_model is True
    with pytest.raises(TypeError, match=r"unknown registration fact 'locl_model' \(did you mean 'local_model'\?\)"):
        reg.add("bad", make_one, locl_model=True)
    assert "bad" not in reg  # nothing half-registered
    plain: Registry[object] = Registry("widget")  # a kind that declares no facts takes none
    with pytest.raises(TypeError, match="NoFacts declares: none"):
        plain.add("one", make_one, colour="red")
    with pytest.raises(TypeError, match="EstimatorInfo facts, not"):  # a reader asking the wrong registry
        from grebench.bench._registry import KindInfo
        ESTIMATORS.get("offline").facts(KindInfo)


def test_a_plugin_with_a_misspelt_fact_fails_at_import_and_is_reported(tmp_path: Path) -> None:
    """A third-party package registering with an unknown fact fails at its import: the plugin report names the
    fact and the part is not registered; the built-in parts still work."""
    site = tmp_path / "site"
    (site / "typo_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "typo_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: typo-plugin\n"
                                                                 "Version: 0.1\n")
    (site / "typo_plugin-0.1.dist-info" / "entry_points.txt").write_text("[grebench]\ntypo = typo_plugin\n")
    (site / "typo_plugin.py").write_text("from grebench.scoring.estimators import ESTIMATORS\n"
                                         "ESTIMATORS.add('typo', lambda arg, ctx: None, needs_corpse=True)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(Path(__file__).parents[1])])}
    code = ("from grebench.registry import load_plugins\nfrom grebench.scoring.estimators import ESTIMATORS\n"
            "print(ESTIMATORS.names()); print(load_plugins())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "'offline'" in out and "'typo'" not in out.splitlines()[0]
    assert "unknown registration fact 'needs_corpse' (did you mean 'needs_corpus'?)" in out


@pytest.mark.parametrize("text", [
    "hf:smollm2-135m@77aa11bb:dtype=bfloat16:chat=00ff00ff:target=judgment-v1",
    "hf:/ckpt/my@model@5e6f7a8b:dtype=float16:chat=1",
    "offline:wb-bigram:corpus=ab12", "offline", "rules-v6", "litellm:openai/gpt-4o@v1",
    "sglang:http://127.0.0.1:8000", "vllm:http://a:1,http://b:2", "sglang:/srv/models/gemma@0011aabb:target=x",
    "hf:m@a672150f:dtype=float32:chat="])
def test_an_id_is_parsed_once_and_printed_back_unchanged(text: str) -> None:
    from grebench.registry import PartId

    part = PartId.parse(text)
    assert str(part) == text and PartId.parse(str(part)) == part


def test_an_id_s_parts() -> None:
    from grebench.registry import PartId

    part = PartId.parse("hf:/ckpt/my@model@5e6f7a8b:dtype=float16:chat=1")
    assert (part.kind, part.model, part.version) == ("hf", "/ckpt/my@model", "5e6f7a8b")
    assert part.option("dtype") == "float16" and part.option("target") is None and part.spec == "hf:/ckpt/my@model"
    url = PartId.parse("sglang:http://127.0.0.1:8000")  # a port is not an option, a URL not a version
    assert (url.model, url.version, url.options) == ("http://127.0.0.1:8000", "", ())
    fit = PartId.parse("offline:wb-bigram:corpus=ab12")
    assert (fit.model, fit.version, fit.option("corpus")) == ("wb-bigram", "", "ab12")


def test_no_module_parses_an_estimator_id_with_its_own_pattern() -> None:
    """The id grammar is read only by PartId (issue 49's done-when: no parse of an estimator id outside its value
    object): no ``split('@')``/``partition('@')`` or ``:dtype=`` pattern elsewhere in the package."""
    import re as _re

    root = Path(__file__).parents[1] / "grebench"
    pattern = _re.compile(r"""(split|partition)\(\s*["']@["']|:dtype=\(|\(\?P<weights>""")
    offenders = [f"{path.relative_to(root)}:{n}" for path in root.rglob("*.py") if path.name != "registry.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders
