"""``kind = "local"``: a model on this machine, served by ``transformers serve`` while the bench stage runs.

Why the candidate is rewritten into an endpoint candidate instead of generating in-process: the bench's one LLM
path (call cache, deadlines, contamination and sealing, cost and latency columns, resumability) then runs
unchanged, and the model's memory is a child process's that ends with the stage.  :meth:`LocalKind.serve` starts
one server per distinct checkpoint (:class:`grebench.runtime.LocalServers`, the pool the panel's local judges use
too) and yields the candidates as ``openai/<model id>`` at ``http://127.0.0.1:PORT/v1``; the port is new on every
start, so the calls are keyed by ``endpoint_id = local:<checkpoint>:<dtype>`` and a second run finds the first
run's calls.

Generation is fixed and recorded: greedy (``temperature = 0``), ``seed = 0``, ``max_tokens`` (default 512) and
``context_tokens`` (default 8192) are the candidate's ``params``, so they are part of every cached request and of
the generation rows.  Nothing else is configurable: with continuous batching the server ignores per-request
sampling settings, so accepting them would record settings that were not used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grebench.bench._registry import CANDIDATE_KINDS, Candidate, CandidateError, _date
from grebench.settings import Settings

if TYPE_CHECKING:
    from grebench.runtime import LocalModel

#: The kind of a model on this machine (``kind = "local"``, and setting ``local_candidates``).
LOCAL_KIND = "local"
LOCAL_KEYS = {"name", "kind", "model", "released", "cutoff", "family", "description", "submitter", "params"}
LOCAL_MAX_TOKENS = 512
#: Generation settings every local candidate uses (not configurable; see the module docstring).
FIXED_PARAMS = {"temperature": 0, "seed": 0}


def is_path_spec(spec: str) -> bool:
    """Whether ``model`` names a checkpoint directory (a path) rather than a catalogue model (a bare name)."""
    return "/" in spec or "\\" in spec or spec.startswith((".", "~"))


def catalogue_dates(spec: str) -> tuple[date | None, date | None]:
    """(cutoff, released) the model catalogue gives for a model name; (None, None) for a name it does not know."""
    from grebench.models import ModelError, catalogue_entry

    try:
        entry = catalogue_entry(spec)
    except ModelError:
        return None, None
    return entry.cutoff, entry.released


def _params(raw: Any, where: str) -> dict[str, Any]:
    from grebench.runtime import LOCAL_CONTEXT_TOKENS

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise CandidateError(f"{where}: params must be a table")
    for key, value in raw.items():
        if key in FIXED_PARAMS and value != FIXED_PARAMS[key]:
            raise CandidateError(f"{where}: params.{key} of a local model is fixed at {FIXED_PARAMS[key]} "
                                 "(greedy, reproducible reviews)")
        if key not in FIXED_PARAMS and key not in ("max_tokens", "context_tokens"):
            raise CandidateError(f"{where}: params.{key}: a local model's generation is fixed (temperature = 0, "
                                 "seed = 0); only max_tokens and context_tokens may be set")
    params = {**FIXED_PARAMS, "max_tokens": LOCAL_MAX_TOKENS, "context_tokens": LOCAL_CONTEXT_TOKENS, **raw}
    for key in ("max_tokens", "context_tokens"):
        if not isinstance(params[key], int) or isinstance(params[key], bool) or params[key] <= 0:
            raise CandidateError(f"{where}: params.{key} must be a positive integer")
    if params["max_tokens"] >= params["context_tokens"]:
        raise CandidateError(f"{where}: params.max_tokens must be smaller than params.context_tokens")
    return params


class LocalKind:
    """``kind = "local"``: a catalogue model or a local checkpoint, served on 127.0.0.1 for the bench stage."""

    name = "local"

    def parse(self, raw: dict[str, Any], where: str, settings: Settings) -> Candidate:
        """Validate the table of a ``local`` candidate."""
        unknown = sorted(set(raw) - LOCAL_KEYS)
        served = [k for k in unknown if k in ("api_base", "api_key_env", "stream")]
        if served:
            raise CandidateError(f"{where}: {', '.join(served)}: a local model is served by grebench itself on "
                                 "127.0.0.1 (for a server you run, use kind = \"llm\" with api_base)")
        if unknown:
            raise CandidateError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: "
                                 f"{', '.join(sorted(LOCAL_KEYS))})")
        spec = raw.get("model")
        if not isinstance(spec, str) or not spec.strip():
            raise CandidateError(f"{where}: missing model (a catalogue name such as 'smollm2-135m', or the path "
                                 "of a local checkpoint directory)")
        spec = spec.strip()
        for key in ("family", "description", "submitter"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise CandidateError(f"{where}: {key} must be a string")
        default_cutoff, default_released = (None, None) if is_path_spec(spec) else catalogue_dates(spec)
        cutoff = _date(raw.get("cutoff"), where, "cutoff") or default_cutoff
        if cutoff is None:
            what = "a local checkpoint" if is_path_spec(spec) else f"the catalogue gives none for {spec!r}"
            raise CandidateError(f"{where}: missing cutoff (training-data cutoff date, YYYY-MM-DD; {what}): "
                                 "without it no paper can be shown clean")
        return Candidate(name=raw["name"], kind=self.name, model=spec,
                         released=_date(raw.get("released"), where, "released") or default_released, cutoff=cutoff,
                         family=raw.get("family"), description=raw.get("description"),
                         submitter=raw.get("submitter"), params=_params(raw.get("params"), where))

    @contextmanager
    def serve(self, candidates: list[Candidate], settings: Settings) -> Iterator[list[Candidate]]:
        """One server per distinct checkpoint for the block; the candidates as its OpenAI-compatible endpoint."""
        from grebench.models import ModelError
        from grebench.runtime import LocalServers, resolve_local

        models: dict[str, LocalModel] = {}
        groups: dict[tuple[Path, str], list[Candidate]] = {}
        for c in candidates:
            spec = c.model or ""
            try:
                if spec not in models:
                    models[spec] = resolve_local(settings, spec)
            except ModelError as exc:
                raise CandidateError(f"candidate {c.name!r}: {exc}") from None
            groups.setdefault((models[spec].path, models[spec].dtype), []).append(c)
        with LocalServers(settings) as servers:
            ready: list[Candidate] = []
            for members in groups.values():
                model = models[members[0].model or ""]
                context = max(c.params["context_tokens"] for c in members)
                concurrency, _why = model.concurrency(settings, context)
                server = servers.server(model, cache_tokens=concurrency * context, concurrency=concurrency)
                ready += [replace(c, model=f"openai/{server.model_id}", api_base=server.api_base, stream=True,
                                  endpoint_id=model.endpoint_id) for c in members]
            yield ready


CANDIDATE_KINDS.add(LOCAL_KIND, LocalKind(), spec="local",
                    summary="a model on this machine, served by transformers serve for the bench stage")
