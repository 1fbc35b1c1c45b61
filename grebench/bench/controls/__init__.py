"""Controls: reviews whose effect on the metric is known in advance (methods.md §4), registered in :data:`CONTROLS`.

See :mod:`grebench.bench.controls._base` for what a control is and how to add one.
"""

from grebench.bench.controls._base import (
    CONTROLS,
    EXPECTATIONS,
    NOT_REWARDED,
    PENALISED,
    PENALISED_OR_NEUTRAL,
    Control,
    ControlInput,
    ControlSkip,
    Messages,
    core_controls,
    default_controls,
    floor_controls,
    register_control,
    register_llm_control,
)
from grebench.bench.controls._paper import derangement

__all__ = ["CONTROLS", "EXPECTATIONS", "NOT_REWARDED", "PENALISED", "PENALISED_OR_NEUTRAL", "Control",
           "ControlInput", "ControlSkip", "Messages", "core_controls",
           "default_controls", "derangement", "floor_controls", "register_control", "register_llm_control"]
