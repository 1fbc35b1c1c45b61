"""GRE-bench: a contamination-resistant leaderboard of LLMs writing peer reviews.

Stages (one subpackage each, talking only through the store):
``ingest`` → ``bench`` → ``scoring`` → ``site``, run on a clock by ``scheduler``.
Importing this package imports no heavy dependency (torch, litellm, gradio,
openreview): implementations are resolved lazily from strings.
"""

__version__ = "0.1.0"
