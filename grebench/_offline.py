"""Environment switches that keep third-party libraries off the internet.

Set before the library is imported (they are read at import time).  Users can
still override each one explicitly in their environment.
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "DO_NOT_TRACK": "1",
}


def apply_offline_defaults() -> None:
    """Set every offline switch that the user has not set."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
