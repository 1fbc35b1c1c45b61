"""A verbatim copy of one of the paper's public reviews: how much the metric rewards copying.

``reference-copy`` is one of the paper's references (seeded pick), word for word, scored like any candidate against
every reference, itself included.  It is what an upload of the public reviews would get, and GEM rewards it
hugely (the candidate *is* the text the log-probability is conditioned on): validation publishes that figure
instead of hiding it, and submissions are defended by the copy detector (:mod:`grebench.bench._copies`), not by
the metric.  The validation also reports ``reference-copy (other refs)``: the same text on the references it was
not copied from, where a copy is just another human review.
"""

from __future__ import annotations

from grebench.bench.controls._base import NOT_REWARDED, ControlInput, ControlSkip, register_control

NAME = "reference-copy"


@register_control(NAME, kind="manipulation", expected=NOT_REWARDED, source="reference",
                  description="A verbatim copy of one of the paper's references (seeded pick), scored against "
                  "every reference, itself included: what copying a public review would earn.")
def _reference_copy(inp: ControlInput) -> str:
    picked = inp.reference(NAME)
    if picked is None:
        raise ControlSkip("paper has no reference with text")
    return picked[1]
