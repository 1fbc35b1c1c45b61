"""Per-kind knowledge lives in the registries: no module but the one registering a part names it.

Every place the package decides on a kind by its name — a string literal in a comparison (``kind == "control"``,
``metric in ("gem", "gem-raw")``), in ``.startswith("hf:")``, or given as ``kind=`` — is checked against the names of
the registered estimators, candidate kinds, judge kinds and metrics, and against spec prefixes such as ``hf:``.  A
name may appear so only in the module that registers it (the entry's ``origin``); the exemptions below are listed
with their reason.  A new ``if kind == "..."`` anywhere else fails this test: the fact belongs in the registration's
meta.  (The same words in other senses — a dict key, a column header, a control's ``source`` — are not decisions.)
"""

from __future__ import annotations

import ast
from pathlib import Path

from grebench.bench import CANDIDATE_KINDS
from grebench.panel import JUDGE_KINDS
from grebench.registry import Registry
from grebench.scoring import METRICS
from grebench.scoring.estimators import ESTIMATORS

PACKAGE = Path(__file__).parents[1] / "grebench"
#: Modules allowed to name parts they do not register, and why.
EXEMPT = {
    "grebench/settings.py": "the defaults of settings name the default parts (estimator, proxy, preprocessor)",
    "grebench/store/migrations": "schema history: a view written once (m0013) is not rewritten",
}


def _registered() -> dict[str, set[str]]:
    """kind name -> the modules that register it (one name may be registered in several registries)."""
    out: dict[str, set[str]] = {}
    registries: list[Registry[object]] = [ESTIMATORS, CANDIDATE_KINDS, JUDGE_KINDS, METRICS]  # type: ignore[list-item]
    for registry in registries:
        for entry in registry.entries():
            if entry.origin.startswith("grebench"):
                out.setdefault(entry.name, set()).add(entry.origin)
    return out


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _decisions(tree: ast.AST) -> list[ast.Constant]:
    """String literals a decision is made on: compared, tested with startswith/endswith, or passed as ``kind=``."""
    places: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            places += [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith", "removeprefix"):
            places += node.args
        elif isinstance(node, ast.keyword) and node.arg == "kind":
            places.append(node.value)
        elif isinstance(node, ast.Dict):  # {"kind": "llm", ...}: a record made with a kind name
            places += [v for k, v in zip(node.keys, node.values, strict=True)
                       if isinstance(k, ast.Constant) and k.value == "kind"]
    out = []
    for place in places:
        for node in ast.walk(place):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(node)
    return out


def _leaks() -> list[str]:
    names = _registered()
    estimators = {e.name for e in ESTIMATORS.entries()}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if any(rel.startswith(prefix) for prefix in EXEMPT):
            continue
        module = _module(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in _decisions(tree):
            text = node.value
            owners = names.get(text)
            if owners is not None and module not in owners:
                found.append(f"{rel}:{node.lineno}: {text!r} (registered in {', '.join(sorted(owners))})")
            prefix = text.split(":", 1)[0]
            if ":" in text and prefix in estimators and module not in names.get(prefix, set()):
                found.append(f"{rel}:{node.lineno}: {text!r} (a spec of estimator {prefix!r})")
    return found


def test_no_module_names_a_part_it_does_not_register() -> None:
    assert _registered()["gem-s"] == {"grebench.scoring._metrics"}  # the scan sees the registries
    assert _leaks() == []


def test_the_scan_sees_decisions_on_kind_names() -> None:
    code = 'if kind == "control" or spec.startswith("hf:") or m in ("gem", "x"): f(kind="llm", name="gem-s")\n'
    assert sorted(c.value for c in _decisions(ast.parse(code))) == ["control", "gem", "hf:", "llm", "x"]
