"""The Auto-PRE judge panel: judges compare reviews pairwise; only judges that pass a qualification exam vote.

Public API (importing it never imports litellm):

* :func:`run_panel` — exam, votes, verdicts (with debate), Bradley–Terry rankings, agreement with GEM-S.
* :class:`Verdict`, :class:`PaperView`, :class:`ReviewView`, :class:`VenueInputs`, :class:`Judge` — the judge
  interface (a panel builds its judges once per job; :meth:`Judge.for_venue` binds one to a venue-year's inputs).
* reference judges (no LLM): :class:`PositionJudge`, :class:`LengthJudge`, :class:`OverlapJudge`, :class:`GemJudge`;
  :class:`LLMJudge` for ``[[judges]]`` tables.
* :func:`bradley_terry`, :func:`weighted_vote`, :func:`run_debate`, :func:`measure` — pure pieces, reusable.
"""

from grebench.panel._aggregate import bradley_terry, judge_score, outcome, rank_with_bootstrap, weighted_vote
from grebench.panel._debate import DebateOutcome, run_debate
from grebench.panel._exam import ExamSets, SelfPreference, build_exam, examine, grade, is_unreachable, self_preference
from grebench.panel._judges import (
    JUDGE_KINDS,
    JUDGES,
    REFERENCE_JUDGES,
    GemJudge,
    Judge,
    JudgeContext,
    LengthJudge,
    OverlapJudge,
    PaperView,
    PositionJudge,
    ReviewView,
    TfIdf,
    VenueInputs,
    Verdict,
    can_debate,
)
from grebench.panel._llm_judge import (
    PROMPT_VERSION,
    JudgeError,
    LLMJudge,
    LLMJudgeKind,
    parse_judges,
    parse_reply,
)
from grebench.panel._machine_metrics import measure
from grebench.panel._run import (
    AgreementRow,
    ExamRow,
    PanelRun,
    Qualified,
    RankingRow,
    build_judges,
    check_judges,
    judge_names,
    run_panel,
)
from grebench.panel._state import PANEL_INPUTS

__all__ = [
    "JUDGES",
    "JUDGE_KINDS",
    "PANEL_INPUTS",
    "PROMPT_VERSION",
    "REFERENCE_JUDGES",
    "AgreementRow",
    "DebateOutcome",
    "ExamRow",
    "ExamSets",
    "GemJudge",
    "Judge",
    "JudgeContext",
    "JudgeError",
    "LLMJudge",
    "LLMJudgeKind",
    "LengthJudge",
    "OverlapJudge",
    "PanelRun",
    "PaperView",
    "PositionJudge",
    "Qualified",
    "RankingRow",
    "ReviewView",
    "SelfPreference",
    "TfIdf",
    "VenueInputs",
    "Verdict",
    "bradley_terry",
    "build_exam",
    "build_judges",
    "can_debate",
    "check_judges",
    "examine",
    "grade",
    "is_unreachable",
    "judge_names",
    "judge_score",
    "measure",
    "outcome",
    "parse_judges",
    "parse_reply",
    "rank_with_bootstrap",
    "run_debate",
    "run_panel",
    "self_preference",
    "weighted_vote",
]
