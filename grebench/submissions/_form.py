"""The Submit form's fields and their checks: every problem of a form is found in one pass, per field.

A submitter who fixes one error only to be told the next one spends a try per error (and each try counts toward
the anti-abuse limit of refused tries: :mod:`._limits`).  So :func:`validate_submission` looks at every field and
raises one :class:`SubmissionError` whose ``fields`` map each field (the :class:`SubmissionForm` attribute) to its
problems, each with advice that works when followed; the message lists them all.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import date
from typing import Any, TypedDict

from grebench.bench import is_reserved_name
from grebench.endpoints import Resolver, URLRejected, check_submitted_url
from grebench.settings import Settings
from grebench.store import utcnow

#: litellm providers a bare model string may use: hosted APIs only (ollama/, vllm/, lm_studio/ ... default to
#: servers on localhost, which would let a submission reach our own network).
HOSTED_PROVIDERS = frozenset({
    "openai", "anthropic", "gemini", "mistral", "groq", "together_ai", "fireworks_ai", "deepseek", "cohere",
    "openrouter", "xai", "perplexity", "deepinfra", "cerebras", "sambanova", "nvidia_nim",
})
ALLOWED_PARAMS = {"temperature": float, "top_p": float, "max_tokens": int, "seed": int}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+ -]{0,79}$")
_MODEL_STRING = re.compile(r"^([a-z0-9_]+)/([A-Za-z0-9._:@+/-]{1,200})$")
_CONTACT = re.compile(r"^[^\s<>\"'`]{3,200}$")

#: How each field is named in a message (the form's own words).
FIELD_NAMES = {"model_name": "model name", "model_string": "model string", "base_url": "base URL",
               "released": "release date", "cutoff": "training-data cutoff", "contact": "contact",
               "api_key": "API key", "params": "parameters", "form": "form"}


class SubmissionError(ValueError):
    """A submission was refused; the message is safe to show to the submitter.

    ``fields`` maps a form field (a :class:`SubmissionForm` attribute, or ``form`` for the form as a whole) to its
    problems; empty for a refusal that is about no field (the rate limit, the queue being full).
    """

    def __init__(self, message: str, fields: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__(message)
        self.fields = {k: list(v) for k, v in (fields or {}).items()}


@dataclass(frozen=True)
class SubmissionForm:
    """The fields of the Submit form, as strings (all optional until validated)."""

    model_name: str = ""
    model_string: str = ""
    base_url: str = ""
    released: str = ""
    cutoff: str = ""
    contact: str = ""
    api_key: str = ""
    params: str = ""

    def __repr__(self) -> str:  # the key must not reach a log line through a repr
        return f"SubmissionForm(model_name={self.model_name!r}, contact={self.contact!r}, api_key=***)"


FORM_FIELDS = tuple(f.name for f in fields(SubmissionForm))


@dataclass
class FieldErrors:
    """Problems found so far, per field, in the order found."""

    by_field: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, problem: str) -> None:
        """Record one problem of field ``name``."""
        self.by_field.setdefault(name, []).append(problem)

    def message(self) -> str:
        """Every problem in one line, each after its field's name (``base URL rejected: …`` for the URL)."""
        parts = []
        for name in sorted(self.by_field, key=_field_order):
            problems = self.by_field[name]
            if name == "base_url":  # the SSRF battery and its users read "base URL rejected: <reasons>"
                parts.append("base URL rejected: " + "; ".join(problems))
            else:
                parts.extend(problems)
        if len(parts) > 1:
            return f"{len(parts)} problems: " + " | ".join(parts)
        return parts[0]

    def raise_if_any(self) -> None:
        """Raise one :class:`SubmissionError` naming every problem, if there is any."""
        if self.by_field:
            raise SubmissionError(self.message(), self.by_field)


def _field_order(name: str) -> int:
    return FORM_FIELDS.index(name) if name in FORM_FIELDS else len(FORM_FIELDS)


def check_date(text: str, label: str, required: bool, errors: FieldErrors, name: str) -> date | None:
    """A form date (``YYYY-MM-DD``, not in the future), or None with the problem recorded under ``name``."""
    text = (text or "").strip()
    if not text:
        if required:
            errors.add(name, f"{label} is required (YYYY-MM-DD)")
        return None
    try:
        value = date.fromisoformat(text[:10])
    except ValueError:
        errors.add(name, f"{label} must be a date YYYY-MM-DD, got {text[:40]!r}")
        return None
    if value > utcnow().date():
        errors.add(name, f"{label} {value} is in the future; give the day it happened")
        return None
    return value


def _params(text: str, errors: FieldErrors) -> dict[str, Any]:
    text = (text or "").strip()
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        errors.add("params", "parameters must be a JSON object, e.g. {\"temperature\": 0.7}")
        return {}
    if not isinstance(raw, dict):
        errors.add("params", "parameters must be a JSON object, e.g. {\"temperature\": 0.7}")
        return {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        kind = ALLOWED_PARAMS.get(key)
        if kind is None:
            errors.add("params", f"parameter {str(key)[:40]!r} is not allowed (allowed: "
                       f"{', '.join(sorted(ALLOWED_PARAMS))})")
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.add("params", f"parameter {key!r} must be a number")
        else:
            out[key] = kind(value)
    return out


def key_needed(form: SubmissionForm) -> bool:
    """Whether the form needs an API key: a hosted provider's model string without a base URL (the operator's keys
    are never used for submissions; an endpoint of one's own may need none)."""
    return not (form.base_url or "").strip()


class SubmissionRow(TypedDict):
    """A valid submission as it is queued, without its key (:func:`validate_submission`)."""

    submitter: str
    contact: str
    model_name: str
    model_string: str
    base_url: str | None
    normalised_url: str | None
    params_json: str
    dedup_key: str
    released: date | None
    cutoff: date | None


def validate_submission(form: SubmissionForm, settings: Settings,
                        resolver: Resolver | Mapping[str, Iterable[str]] | None = None) -> SubmissionRow:
    """Check every field; return the row to queue (without the key) or raise :class:`SubmissionError` naming every
    problem of every field at once (``fields``)."""
    errors = FieldErrors()
    name = (form.model_name or "").strip()
    if not _NAME.match(name):
        errors.add("model_name", "model name: 1-80 characters, starting with a letter or digit; letters, digits, "
                   "space and . _ : + -")
    elif isinstance(settings, Settings) and is_reserved_name(settings, name):
        errors.add("model_name", f"model name {name!r} is reserved (the human baseline, a control or a configured "
                   "candidate); choose another name")
    contact = (form.contact or "").strip()
    if not _CONTACT.match(contact):
        errors.add("contact", "contact: an e-mail address or handle (3-200 characters, no spaces)")
    model_string = (form.model_string or "").strip()
    base_url = (form.base_url or "").strip()
    if not model_string and not base_url:
        errors.add("model_string", "give a litellm model string of a hosted provider (e.g. openai/gpt-4o-mini) or "
                   "an OpenAI-compatible base URL")
    normalised = None
    if base_url:
        try:
            normalised = check_submitted_url(base_url, settings, resolver).url
        except URLRejected as exc:
            for problem in exc.problems:
                errors.add("base_url", problem)
        if not model_string and _NAME.match(name):  # (a bad name is its own problem, not the model string's)
            model_string = "openai/" + name.replace(" ", "-")  # the model id sent to the endpoint
    match = _MODEL_STRING.match(model_string) if model_string else None
    if model_string and not match:
        errors.add("model_string", "model string must look like provider/model, e.g. openai/gpt-4o-mini")
    elif match and base_url and match.group(1) != "openai":
        errors.add("model_string", "a base URL is called as an OpenAI-compatible endpoint: the model string must be "
                   "openai/<model id> (or left empty)")
    elif match and not base_url and match.group(1) not in HOSTED_PROVIDERS:
        errors.add("model_string", f"provider {match.group(1)!r} needs a base URL (its default server is local); "
                   f"hosted providers: {', '.join(sorted(HOSTED_PROVIDERS))}")
    cutoff = check_date(form.cutoff, "training-data cutoff", True, errors, "cutoff")
    released = check_date(form.released, "release date", False, errors, "released")
    if released is not None and cutoff is not None and cutoff > released:
        errors.add("cutoff", f"the training-data cutoff cannot be after the release date (cutoff {cutoff}, released "
                   f"{released})")
    key = form.api_key or ""
    if len(key) > 1000 or any(ord(c) < 32 for c in key):
        errors.add("api_key", "the API key is too long or contains control characters")
    elif key_needed(form) and not key.strip():
        provider = match.group(1) if match else "hosted"
        errors.add("api_key", f"a {provider} model is called with your own API key: give one (the operator's keys "
                   "are never used for submissions)")
    params = _params(form.params, errors)
    errors.raise_if_any()
    params_json = json.dumps(params, sort_keys=True)
    dedup = hashlib.sha256(json.dumps([normalised or model_string, model_string, name.lower(), params],
                                      sort_keys=True).encode()).hexdigest()
    return {"submitter": contact.lower(), "contact": contact, "model_name": name, "model_string": model_string,
            "base_url": base_url or None, "normalised_url": normalised, "params_json": params_json,
            "dedup_key": dedup, "released": released, "cutoff": cutoff}
