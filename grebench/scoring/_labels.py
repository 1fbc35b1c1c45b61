"""Words for the ids the boards use, from the registries, stored in ``labels`` for the readers.

The site, the app and the snapshots never import a registry of parts (the web layer computes nothing): the boards
stage writes, next to the boards, the label of every metric, estimator id, preprocessor id and candidate kind they
use, with an estimator's role (a language model, or a fast proxy) and a kind's role and plot colour.  Each label comes
from the part's registration (:class:`~grebench.scoring.estimators.EstimatorInfo`, the metric's ``label``, the
candidate kind's :class:`~grebench.bench.KindInfo`, a preprocessor's ``label`` meta), so a plugin's part is named on
the board without editing any other file.
"""

from __future__ import annotations

import re
from typing import Any

from grebench.registry import Registry
from grebench.store import MODEL_ROLE, PROXY_ROLE, Store


def preprocessor_label(preprocessor_id: str) -> str:
    """``rules-v6`` → ``rules preprocessor``; ``litellm:openai/gpt-4o@v1`` → ``LLM preprocessor (gpt-4o)``."""
    from grebench.registry import UnknownPart
    from grebench.scoring._metrics import RAW_PREPROCESSOR
    from grebench.scoring._preprocess import PREPROCESSORS, PreprocessorInfo

    if preprocessor_id == RAW_PREPROCESSOR:
        return "no preprocessor (raw text)"
    kind = re.sub(r"-v\d+$", "", Registry.split(preprocessor_id)[0])
    try:
        label = PREPROCESSORS.get(kind).facts(PreprocessorInfo).label
    except UnknownPart:
        label = None
    if callable(label):
        return str(label(preprocessor_id))
    short = preprocessor_id if len(preprocessor_id) <= 48 else preprocessor_id[:47] + "…"
    return f"{short} preprocessor"


def label_rows(store: Store) -> list[list[Any]]:
    """``[what, id, label, role, colour]`` for every metric, estimator, preprocessor and candidate kind in use."""
    from grebench.bench import kind_info
    from grebench.scoring._metrics import METRICS
    from grebench.scoring.estimators import estimator_info

    out: list[list[Any]] = []
    for entry in METRICS:
        out.append(["metric", entry.name, entry.obj.label, None, None])
    in_use = store.rows("SELECT DISTINCT metric, estimator, preprocessor FROM scores")
    for name in sorted({r["metric"] for r in in_use} - set(METRICS.names())):
        out.append(["metric", name, name, None, None])  # a metric no longer registered: its own name
    for est in sorted({r["estimator"] for r in in_use}):
        info = estimator_info(est)
        out.append(["estimator", est, info.describe(est), PROXY_ROLE if info.proxy else MODEL_ROLE, None])
    for prep in sorted({r["preprocessor"] for r in in_use}):
        out.append(["preprocessor", prep, preprocessor_label(prep), None, None])
    kinds = {r["kind"] for r in store.rows("SELECT DISTINCT kind FROM candidates")}
    for kind in sorted(kinds):
        facts = kind_info(kind)
        out.append(["candidate_kind", kind, facts.tag, facts.role, facts.colour])
    return out


def store_labels(store: Store) -> int:
    """Rewrite ``labels`` (inside the caller's transaction); the number of labels."""
    rows = label_rows(store)
    store.con.execute("DELETE FROM labels")
    store.insert_rows("labels", ("what", "id", "label", "role", "colour"), rows)
    return len(rows)


def label_parts() -> list[str]:
    """What the labels depend on besides the stored ids: the registered metrics, estimators, preprocessors and
    candidate kinds (a plugin added or removed changes the boards' fingerprint)."""
    from grebench.bench import CANDIDATE_KINDS
    from grebench.scoring._metrics import METRICS
    from grebench.scoring._preprocess import PREPROCESSORS
    from grebench.scoring.estimators import ESTIMATORS

    return [f"{registry.kind}:{e.name}:{e.origin}" for registry in (METRICS, ESTIMATORS, PREPROCESSORS,
                                                                      CANDIDATE_KINDS) for e in registry]
