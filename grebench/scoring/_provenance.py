"""What produced the published numbers, as one JSON-ready dict (issue 34 §3).

:func:`provenance` reads the store (boards, scored setups, candidates, the judge panel) and this install's code:
the code version (the git commit when run from a checkout, read from ``.git`` without running git; the package
version always) with a SHA-256 of the scoring code, the evaluation LM of every board (its id names the weights hash,
dtype and options), the preprocessors and metric definitions with their versions, the SHA-256 of every prompt
template, each candidate's decoding settings, the paper sample, the aggregation settings and the judge panel with
its exam results.  leaderboard.json, the site's pages, the snapshot manifest and the app all show this one dict.

Secrets never enter it: a candidate says which environment variable holds its key (the name, never a value), a
parameter whose name looks like a credential is replaced by ``"[redacted]"``, and a base URL loses its user
information and query.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import grebench
from grebench.registry import PartId
from grebench.scoring._boards import BOARD_VERSION
from grebench.scoring._metrics import METRICS, RAW_PREPROCESSOR
from grebench.scoring._preprocess import PREPROCESS_PROMPT_VERSION
from grebench.scoring._request import GEM_PROMPT_VERSION
from grebench.scoring._rules import RULES_ID
from grebench.store import (
    CandidateProvenance,
    CodeVersion,
    EstimatorFacts,
    EstimatorProvenance,
    PanelMember,
    PreprocessorProvenance,
    Provenance,
    Store,
    VenueProvenance,
)

_PACKAGE = Path(grebench.__file__).resolve().parent
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_REF = re.compile(r"^refs/[A-Za-z0-9._/-]+$")
#: A parameter named like a credential (``api_key``, ``Authorization``, ``access-token``; not ``max_tokens``).
_SECRET = re.compile(r"(^|[_-])(api[_-]?key|key|token|secret|password|passwd|auth|authorization|credentials?|"
                     r"bearer|cookie)($|[_-])", re.IGNORECASE)
#: The command that rebuilds the numbers from a snapshot (docs/store.md, "Reproducing the numbers").
REBUILD_COMMAND = "grebench snapshot rebuild SNAPSHOT_DIR"
def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root`` (a repository or a worktree), read from its ``.git``; None when ``root``
    is no checkout or the files say nothing clear (a ref name is checked before it names a file)."""
    dotgit = root / ".git"
    try:
        if dotgit.is_file():  # a worktree or submodule: "gitdir: PATH"
            text = dotgit.read_text(encoding="utf-8").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
        elif dotgit.is_dir():
            gitdir = dotgit
        else:
            return None
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head if _SHA.match(head) else None
        ref = head.removeprefix("ref:").strip()
        if not _REF.match(ref) or ".." in ref:
            return None
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
        for base in (gitdir, common):
            if (base / ref).is_file():
                sha = (base / ref).read_text(encoding="utf-8").strip()
                return sha if _SHA.match(sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name.strip() == ref and _SHA.match(sha):
                    return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None


def files_sha256(files: list[Path], root: Path) -> str:
    """SHA-256 over ``files`` sorted by their path below ``root`` (each: relative path, NUL, bytes, NUL)."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def code_version() -> CodeVersion:
    """The package version, the git commit (None outside a checkout) and the SHA-256 of the scoring code (every
    ``.py`` file of ``grebench/scoring``, estimators included, and its word lists)."""
    scoring = _PACKAGE / "scoring"
    files = [p for p in scoring.rglob("*") if p.is_file() and (p.suffix == ".py" or p.parent.name == "data")
             and "__pycache__" not in p.parts]
    return {"package_version": grebench.__version__, "git_commit": git_commit(_PACKAGE.parent),
            "scoring_sha256": files_sha256(files, _PACKAGE)}


def prompt_hashes() -> dict[str, str]:
    """SHA-256 of every prompt template (``grebench/*/prompts/*.txt``) and of the controls' code, by path."""
    out = {p.relative_to(_PACKAGE).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
           for p in sorted(_PACKAGE.glob("*/prompts/*.txt"))}
    controls = _PACKAGE / "bench" / "controls"
    out["bench/controls/*.py"] = files_sha256(list(controls.glob("*.py")), _PACKAGE)
    return out


def estimator_facts(estimator_id: str) -> EstimatorFacts:
    """An estimator id in parts: ``hf:smollm2-135m@a672150f:dtype=bfloat16:chat=…`` → kind, model, weights hash
    and options (dtype among them); an id of another shape (the offline model's) is kept whole under ``id``."""
    part = PartId.parse(estimator_id)
    if not (part.model and part.version):
        return {"id": estimator_id, "kind": part.kind}
    options = dict(part.options)
    return {"id": estimator_id, "kind": part.kind, "model": part.model, "weights_sha8": part.version,
            "dtype": options.get("dtype"), "options": options}


def _clean_url(url: str | None) -> str | None:
    """A base URL without user information, query or fragment (where a key could hide)."""
    if not url:
        return None
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.hostname or "" if parts.port is None else f"{parts.hostname}:{parts.port}",
                       parts.path, "", ""))


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "[redacted]" if _SECRET.search(str(k)) else _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def _has(store: Store, table: str) -> bool:
    return bool(store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table])
                or store.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [table]))


def _rows(store: Store, table: str, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    return store.rows(sql, params or []) if _has(store, table) else []


def _candidates(store: Store, names: set[str]) -> dict[str, CandidateProvenance]:
    from grebench.bench import SUBMITTED_KIND
    prompts = {}
    for r in _rows(store, "generations", "SELECT candidate, list(DISTINCT prompt_version ORDER BY prompt_version) "
                   "AS versions FROM generations GROUP BY candidate"):
        prompts[r["candidate"]] = list(r["versions"])
    out: dict[str, CandidateProvenance] = {}
    for r in _rows(store, "candidates", "SELECT * FROM candidates ORDER BY name"):
        if r["name"] not in names:
            continue
        try:
            params = json.loads(r.get("params_json") or "{}")
        except ValueError:
            params = {}
        # a nested parameter is kept as its JSON text: the snapshot manifest's nesting is bounded (8 levels)
        decoding = {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                    for k, v in _redact(params if isinstance(params, dict) else {"params": params}).items()}
        # a submitted endpoint's URL is the submitter's: never published (the submissions log has its fingerprint)
        api_base = None if r["kind"] == SUBMITTED_KIND else _clean_url(r.get("api_base"))
        out[r["name"]] = {"kind": r["kind"], "model": r.get("model"), "api_base": api_base,
                          "api_key_env": r.get("api_key_env") or None, "decoding": decoding,
                          "prompt_versions": prompts.get(r["name"], [])}
    return out


def _scoring_code(code_json: str | None) -> CodeVersion | None:
    """The code version recorded with a scored setup (``scored_setups.code_json``; None before it was recorded)."""
    try:
        code = json.loads(code_json) if code_json else None
    except ValueError:
        return None
    return cast(CodeVersion, code) if isinstance(code, dict) else None


def _panel(store: Store, venue_id: str) -> list[PanelMember]:
    judges = {r["name"]: r for r in _rows(store, "judges", "SELECT name, kind, model, family FROM judges")}
    exams = _rows(store, "judge_exams", "SELECT judge, p_c, p_p, p_s, passed, weight FROM judge_exams "
                  "WHERE venue_id = ? ORDER BY judge", [venue_id])
    return [cast(PanelMember, {**{k: judges.get(e["judge"], {}).get(k) for k in ("kind", "model")}, **e})
            for e in exams]


def provenance(store: Store, venue_id: str | None = None) -> Provenance:
    """What produced the stored boards (of ``venue_id``, or of every venue): see the module docstring.  The same
    store and code give the same dict (no clock in it), so it can sit beside the boards it describes."""
    where, params = ("WHERE scope = 'all'" + (" AND venue_id = ?" if venue_id else "")), \
        ([venue_id] if venue_id else [])
    boards = _rows(store, "boards", f"SELECT venue_id, metric, estimator, preprocessor, papers, papers_eligible, "
                   f"sample_json, bootstrap_samples, seed FROM boards {where} ORDER BY ALL", params)
    setups = {(r["estimator_id"], r["preprocessor_id"]): r for r in _rows(
        store, "scored_setups", "SELECT * FROM scored_setups ORDER BY scored_at")}
    estimators: dict[str, EstimatorProvenance] = {}
    preprocessors: dict[str, PreprocessorProvenance] = {}
    venues: dict[str, VenueProvenance] = {}
    for b in boards:
        setup = next((s for (e, _), s in setups.items() if e == b["estimator"]), None)
        estimators.setdefault(b["estimator"], {
            **estimator_facts(b["estimator"]), "spec": None if setup is None else setup["estimator_spec"],
            "scored_with_code": None if setup is None else _scoring_code(setup.get("code_json"))})
        pspec = next((s["preprocessor_spec"] for (_, p), s in setups.items() if p == b["preprocessor"]),
                     None if b["preprocessor"] != RAW_PREPROCESSOR else RAW_PREPROCESSOR)
        preprocessors.setdefault(b["preprocessor"], {"spec": pspec,
                                                     "version": _preprocessor_version(b["preprocessor"])})
        sample = json.loads(b["sample_json"]) if b.get("sample_json") else None
        venue = venues.setdefault(b["venue_id"], {"sample": None, "aggregation": None, "panel": None})
        venue["sample"] = {"seed": b["seed"] if sample else None, "papers": b["papers"],
                           "eligible": b["papers_eligible"],
                           "description": sample.get("description") if isinstance(sample, dict) else
                           "every eligible paper"} if venue["sample"] is None else venue["sample"]
        venue["aggregation"] = {"version": BOARD_VERSION, "bootstrap_samples": b["bootstrap_samples"],
                                "seed": b["seed"]}
    for vid, venue in venues.items():
        venue["panel"] = _panel(store, vid)
    used = {r["candidate"] for r in _rows(store, "board_rows", "SELECT DISTINCT candidate FROM board_rows WHERE "
                                          f"board_id IN (SELECT board_id FROM boards {where})", params)}
    return {
        "code": code_version(),
        "estimators": estimators,
        "preprocessors": preprocessors,
        "metrics": {m: {"label": e.obj.label, "conditions_on": e.obj.conditions_on, "raw": e.obj.raw,
                        "prompt_version": GEM_PROMPT_VERSION}
                    for m, e in ((e.name, e) for e in METRICS) if any(b["metric"] == m for b in boards)},
        "prompts": prompt_hashes(),
        "candidates": _candidates(store, used),
        "venues": venues,
        "rebuild": REBUILD_COMMAND,
    }


def _preprocessor_version(preprocessor_id: str) -> str:
    """The version a preprocessor id carries: the rules' own id, an LLM rewrite's prompt version, or the id."""
    if preprocessor_id == RULES_ID or preprocessor_id.startswith("rules-"):
        return preprocessor_id
    if preprocessor_id.startswith("litellm:"):
        return PartId.parse(preprocessor_id).version or PREPROCESS_PROMPT_VERSION
    return preprocessor_id
