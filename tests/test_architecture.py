"""The structure holds: layers (import-linter, in CI), no cross-package private imports, no cycles, light imports."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

HEAVY = ("torch", "transformers", "gradio", "litellm", "openreview", "fitz", "pymupdf")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("grebench")


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def test_no_module_imports_another_package_s_private_module(graph: grimp.ImportGraph) -> None:
    """`grebench.x._impl` may be imported only from inside `grebench.x` (its package exports the public API)."""
    leaks = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            parts = imported.split(".")
            for i, part in enumerate(parts[1:], start=1):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:i])
                    if not (module == owner or module.startswith(owner + ".")):
                        leaks.append(f"{module} -> {imported}")
                    break
    assert leaks == []


def scoring_imports_beyond_its_api(source: str, public: set[str]) -> list[str]:
    """The imports of scoring in ``source`` that are not ``from grebench.scoring import <a name in its __all__>``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grebench.scoring"):
            if node.module != "grebench.scoring":
                found.append(f"from {node.module} import ...")
            found += [f"grebench.scoring.{a.name}" for a in node.names if a.name not in public]
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.startswith("grebench.scoring")]
    return found


def test_the_panel_uses_only_scoring_s_public_api() -> None:
    """The panel (a layer above scoring) talks to it through ``grebench.scoring``'s public names only: no
    ``grebench.scoring._engine`` or ``grebench.scoring.estimators._hf``, no name left out of ``__all__``."""
    import grebench.panel
    import grebench.scoring

    public = set(grebench.scoring.__all__)
    folder = Path(grebench.panel.__file__).parent
    leaks = {str(f.relative_to(folder)): found for f in sorted(folder.rglob("*.py"))
             if (found := scoring_imports_beyond_its_api(f.read_text(encoding="utf-8"), public))}
    assert leaks == {}


def test_a_private_scoring_import_would_be_caught() -> None:
    """The check is not vacuous: what the panel imported before it was its own package is found."""
    source = ("from grebench.scoring._engine import _evaluate\n"
              "def f():\n    from grebench.scoring.estimators._hf import HF\n"
              "import grebench.scoring._leaderboard\nfrom grebench.scoring import FLOOR_JOIN, run_scoring\n")
    assert scoring_imports_beyond_its_api(source, {"run_scoring"}) == [
        "from grebench.scoring._engine import ...", "grebench.scoring._evaluate",
        "import grebench.scoring._leaderboard",
        "grebench.scoring.FLOOR_JOIN", "from grebench.scoring.estimators._hf import ...", "grebench.scoring.HF"]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle in a directed graph, as a path, or None (depth-first search with colours)."""
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        if state.get(node) == 1:
            return [*path, node]
        if state.get(node) == 2:
            return None
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            found = visit(nxt, [*path, node])
            if found:
                return found
        state[node] = 2
        return None

    for node in sorted(edges):
        found = visit(node, [])
        if found:
            return found
    return None


def test_packages_form_no_import_cycle(graph: grimp.ImportGraph) -> None:
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _top(module), _top(imported)
            if a != b and "(root)" not in (a, b):
                edges.setdefault(a, set()).add(b)
    assert find_cycle(edges) is None


def test_a_cycle_would_be_caught() -> None:
    """The check is not vacuous: the llm -> site -> scoring -> llm loop this layout removed is found."""
    assert find_cycle({"llm": {"site"}, "site": {"scoring"}, "scoring": {"llm"}}) == ["llm", "site", "scoring", "llm"]


def test_importing_the_stages_and_their_registries_stays_light() -> None:
    """`import grebench.<stage>` and listing every registry never imports torch, gradio, litellm or PyMuPDF."""
    code = (
        "import sys, json\n"
        "import grebench, grebench.bench, grebench.runtime, grebench.scoring, grebench.pipeline, grebench.site, "
        "grebench.scheduler\n"
        "from grebench.scoring.estimators import ESTIMATORS\n"
        "from grebench.ingest import SOURCES\n"
        "from grebench.bench import CANDIDATE_KINDS, CONTROLS\n"
        "from grebench.panel import JUDGES, JUDGE_KINDS\n"
        "from grebench.models import MODELS\n"
        "names = [r.names() for r in (ESTIMATORS, SOURCES, CANDIDATE_KINDS, CONTROLS, JUDGES, JUDGE_KINDS, MODELS)]\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


#: The most ``dict[str, Any]`` the package may hold (issue 49 counted 429 lines holding one at its filing; this
#: counts every occurrence).  Lower it when a loose dict becomes a typed record; the test refuses any rise, so
#: contracts only get tighter.
LOOSE_DICT_CEILING = 205


def test_loose_dicts_only_fall() -> None:
    root = Path(__file__).parents[1] / "grebench"
    count = sum(path.read_text().count("dict[str, Any]") for path in root.rglob("*.py"))
    assert count <= LOOSE_DICT_CEILING, (
        f"{count} `dict[str, Any]` in grebench/, over the ceiling of {LOOSE_DICT_CEILING}: type the new one (a "
        "dataclass or a TypedDict) instead")


#: Parameters and fields typed as the whole ``Settings`` in grebench/ (issue 49: 172 signatures took the flat class of
#: 99 settings).  A part that needs one domain takes its section (``AppSettings``, ``SubmissionSettings``, ...;
#: grebench/settings.py); this number may only fall.
WHOLE_SETTINGS_CEILING = 192  # 193 before issue 61; the snapshot verify command reads the import limits


def test_whole_settings_parameters_only_fall() -> None:
    root = Path(__file__).parents[1] / "grebench"
    count = sum(len(re.findall(r"\b\w+: Settings\b", path.read_text())) for path in root.rglob("*.py"))
    assert count <= WHOLE_SETTINGS_CEILING, (
        f"{count} parameters or fields typed `Settings` in grebench/, over the ceiling of {WHOLE_SETTINGS_CEILING}: "
        "hand the new part the section it reads (settings.app, settings.scoring, ...) instead")


def test_review_kinds_are_named_by_their_record() -> None:
    """``official_review`` and ``meta_review`` are constants of :class:`grebench.store.ReviewRecord` (issue 49: the
    bare literal was in 8 modules of 6 packages); only the record and the schema's comment spell them."""
    root = Path(__file__).parents[1] / "grebench"
    spelled = [str(path.relative_to(root)) for path in root.rglob("*.py")
               if path.name not in ("_records.py",) and "migrations" not in path.parts
               and any(f"{q}{kind}{q}" in path.read_text() for kind in ("official_review", "meta_review")
                       for q in ("'", '"'))]
    assert not spelled, spelled
