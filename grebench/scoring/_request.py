"""The log-prob request shared by the scoring stage and every estimator, and the GEM prompt.

The prompt follows the structure of the GEM paper's App. C.2 in our own wording: the system message casts the
evaluation-LM as the *second* reviewer of a paper; the user message gives the synopsis (or "Not available.") and
the first reviewer's judgment lines (or "Not available." for the marginal term); the reference's judgment lines
are the forced assistant output whose log-probability is summed.  Changing any wording here changes every score,
so it must come with a new :data:`GEM_PROMPT_VERSION`.
"""

from __future__ import annotations

from dataclasses import dataclass

GEM_PROMPT_VERSION = "gem-v1"
NOT_AVAILABLE = "Not available."

SYSTEM_PROMPT = (
    "You are the second reviewer of a machine learning paper submitted to a peer-reviewed conference. "
    "You are given the abstract of the paper, when available, and the judgments written by the first reviewer, "
    "when available. Write your own review judgments of the paper, one judgment per line, each line starting with "
    "'The reviewer appreciates', 'The reviewer criticizes', 'The reviewer questions' or 'The reviewer suggests'."
)


@dataclass(frozen=True)
class LogprobRequest:
    """One teacher-forced scoring request: log P(target | synopsis, first_review) under the evaluation-LM."""

    paper_id: str
    synopsis: str | None
    first_review: str | None
    target: str
    prompt_version: str = GEM_PROMPT_VERSION


@dataclass(frozen=True)
class LogprobResult:
    """Sum of natural-log probabilities over the forced-output tokens, and how many tokens were counted."""

    logprob: float
    n_tokens: int


def render_user_message(synopsis: str | None, first_review: str | None) -> str:
    """The user turn of the GEM prompt (split out so estimators can locate where the first review begins)."""
    return (
        "[Abstract of the paper]\n"
        f"{synopsis if synopsis else NOT_AVAILABLE}\n\n"
        "[Review judgments from the first reviewer]\n"
        f"{first_review if first_review else NOT_AVAILABLE}"
    )


def render_messages(req: LogprobRequest) -> list[dict[str, str]]:
    """The [system, user] messages of the GEM prompt; the request's target is the assistant turn."""
    if req.prompt_version != GEM_PROMPT_VERSION:
        raise ValueError(f"unknown GEM prompt version {req.prompt_version!r} (this build knows {GEM_PROMPT_VERSION!r})")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_user_message(req.synopsis, req.first_review)},
    ]
