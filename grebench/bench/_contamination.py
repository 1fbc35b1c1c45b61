"""Contamination windows: which (candidate, paper) pairs may count on the board.

A model whose training-data cutoff is on or after the day a paper's reviews
became public may have read them: that pair is *contaminated*, excluded from
the model's board score and counted separately.  A generation made before the
reviews were public is *sealed* and clean whatever the cutoff.  The human
baseline and the controls have no cutoff and are always clean; an ``imported``
candidate (reviews written elsewhere) without a cutoff is a model that may have
read anything: only its sealed reviews are clean.  The ``clean_pairs`` view of
the store applies the same rule.

"The day the paper's reviews became public" is always the paper's *public since*
date (:func:`grebench.store.public_since`, the ``paper_public_since`` view): the
earliest ``reviews_public_at`` of the paper and of every linked version of the
same work (a resubmission's earlier venue); callers pass that date here.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from grebench.bench._registry import CONTESTANT, IMPORTED_KIND, kind_info
from grebench.store import Store


def _day(value: date | datetime | str | None) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


__all__ = ["IMPORTED_KIND", "clean_pairs", "is_clean", "is_sealed", "is_vouched"]


def is_clean(cutoff: date | datetime | str | None, reviews_public_at: date | datetime | str | None,
             kind: str | None = None) -> bool:
    """True unless the cutoff is on or after the day the paper's reviews became public.

    No cutoff (human, controls) is clean, except for a kind registered with ``clean_without_cutoff=False`` (imported
    reviews: their model is unknown, so without a cutoff nothing shows them clean; their sealed reviews still
    count: see :func:`is_sealed`).  Reviews not public yet are clean.
    """
    cut, public = _day(cutoff), _day(reviews_public_at)
    if cut is None:
        return kind is None or kind_info(kind).clean_without_cutoff
    return public is None or cut < public


def is_vouched(kind: str | None, cutoff: date | datetime | str | None, params_json: str | None) -> bool | None:
    """Whether the operator vouches for a contestant's cutoff: a configured model (its kind is clean without one), a
    submitted model the operator approved (it has a cutoff), an import the operator trusted (``cutoff_trusted``).

    None for the baseline and the references (built from human reviews: no cutoff to vouch for).  An unvouched
    contestant counts only on its sealed reviews.
    """
    facts = kind_info(kind)
    if facts.role != CONTESTANT:
        return None
    if facts.clean_without_cutoff:
        return True
    try:
        params = json.loads(params_json or "{}")
    except ValueError:
        params = {}
    if isinstance(params, dict) and "cutoff_trusted" in params:
        return bool(params["cutoff_trusted"])
    return cutoff is not None


def is_sealed(generated_at: datetime | None, reviews_public_at: datetime | None) -> bool:
    """Whether a generation was made before the paper's reviews were public."""
    return generated_at is not None and reviews_public_at is not None and generated_at < reviews_public_at


def clean_pairs(store: Store, candidate: str | None = None) -> list[dict[str, Any]]:
    """Rows ``{candidate, paper_id, generation_id, clean, sealed}`` from the ``clean_pairs`` view."""
    sql = "SELECT candidate, paper_id, generation_id, clean, sealed FROM clean_pairs"
    params: list[Any] = []
    if candidate is not None:
        sql += " WHERE candidate = ?"
        params.append(candidate)
    return store.rows(sql + " ORDER BY candidate, paper_id", params)
