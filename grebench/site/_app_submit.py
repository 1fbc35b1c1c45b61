"""The app's Submit tab: the endpoint form with each field's problems beside it, the limits, and the import form.

Every check runs server-side (:mod:`grebench.submissions`); this module only lays the forms out and shows what the
checks answer.  ``/submit`` and ``/submit_import`` stay one-string API endpoints (their message lists every
problem); the per-field problems travel in a ``gr.State`` (which the API leaves out) to a follow-up event that
writes each under its own field.  The form states the limits, and the line under it says what the visitor's
address has used and, when a limit is reached, when the next try is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from grebench.endpoints import KeyVault, Resolver
from grebench.settings import Settings
from grebench.submissions import (
    UPLOAD_MAX_BYTES,
    ImportForm,
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    limits_sentence,
    queue_import,
    read_upload,
)

#: The endpoint form: (field, label, placeholder, secret).
FIELDS: tuple[tuple[str, str, str, bool], ...] = (
    ("model_name", "Model name", "My-Model-1", False),
    ("model_string", "litellm model string (hosted providers)", "openai/gpt-4o-mini", False),
    ("base_url", "OpenAI-compatible base URL (or leave empty for a hosted provider)", "https://api.example.com/v1",
     False),
    ("released", "Release date (YYYY-MM-DD, optional)", "2025-03-01", False),
    ("cutoff", "Training-data cutoff (YYYY-MM-DD)", "2024-12-01", False),
    ("contact", "Contact (e-mail or handle)", "you@example.org", False),
    ("api_key", "API key (required for a hosted provider's model string; optional for your own base URL)", "",
     True),
    ("params", "Parameters (JSON, optional)", '{"temperature": 0.7}', False),
)
#: The import form's fields whose problems are shown beside them.
IMPORT_FIELDS = ("candidate", "contact", "cutoff", "file")

INTRO = ("Submit a model: a litellm model string of a hosted provider (then your API key is required: the operator's "
         "keys are never used for submissions) or an OpenAI-compatible base URL (https, a public address; a key is "
         "optional). It is evaluated on papers whose reviews became public after its training-data cutoff. The key is "
         "encrypted or kept in memory only, never shown back, and deleted when the evaluation ends.")


def field_errors(errors: Mapping[str, Sequence[str]] | None, names: Iterable[str]) -> list[Any]:
    """One update per field: its problems as a short list beside it (hidden when it has none)."""
    import gradio as gr

    errors = errors or {}
    out = []
    for name in names:
        problems = errors.get(name) or []
        text = "\n".join(f"- {p}" for p in problems)
        out.append(gr.update(value=text, visible=bool(problems)))
    return out


def build_submit_tab(settings: Settings, queue: SubmissionQueue, vault: KeyVault,
                     resolver: Resolver | Mapping[str, Iterable[str]] | None,
                     address: Callable[[Any], str | None], on_change: Callable[[], None],
                     import_check: Callable[[], tuple[frozenset[str], frozenset[str]]]) -> Any:
    """Lay out the Submit tab inside the current ``gr.Tab``; returns the allowance Markdown (filled on page load)."""
    import gradio as gr

    from grebench.site._uploads import discard_upload

    def allowance(request: Any = None) -> str:
        return queue.allowance(settings.submissions, address(request)).sentence()

    def submit(model_name: str, model_string: str, base_url: str, released: str, cutoff: str, contact: str,
               api_key: str, params: str, request: Any = None) -> tuple[str, dict[str, list[str]]]:
        form = SubmissionForm(model_name=model_name or "", model_string=model_string or "", base_url=base_url or "",
                              released=released or "", cutoff=cutoff or "", contact=contact or "",
                              api_key=api_key or "", params=params or "")
        result = queue.submit(form, settings, vault, resolver, source=address(request))
        on_change()  # the Queue tab shows one's own submission at once
        return str(result["message"]), dict(result.get("errors") or {})

    def show(errors: dict[str, list[str]] | None, request: Any = None) -> list[Any]:
        return [*field_errors(errors, [name for name, *_ in FIELDS]), allowance(request)]

    def submit_import(candidate: str, contact: str, cutoff: str, model: str, description: str, upload: Any,
                      request: Any = None) -> tuple[str, dict[str, list[str]]]:
        form = ImportForm(candidate=candidate or "", contact=contact or "", cutoff=cutoff or "", model=model or "",
                          description=description or "")
        path = upload_path(upload)
        try:
            data = read_upload(path)
        except SubmissionError as exc:
            queue.record_refusal(address(request))
            return f"Rejected: {exc}", {"file": [str(exc)]}
        finally:
            discard_upload(path)  # the bytes are read (or refused): the uploaded copy goes now
        papers, names = import_check()
        result = queue_import(queue, form, data, settings, papers, names, source=address(request))
        on_change()
        return str(result["message"]), dict(result.get("errors") or {})

    def show_import(errors: dict[str, list[str]] | None, request: Any = None) -> list[Any]:
        return [*field_errors(errors, IMPORT_FIELDS), allowance(request)]

    # Gradio passes the request to a handler whose parameter is annotated gr.Request (the rate limit's address)
    for fn in (allowance, submit, show, submit_import, show_import):
        fn.__annotations__["request"] = gr.Request

    gr.Markdown(INTRO)
    gr.Markdown(limits_sentence(settings.submissions), elem_id="submit-limits")
    status = gr.Markdown(elem_id="submit-allowance")
    inputs, marks = [], []
    for name, label, placeholder, secret in FIELDS:
        inputs.append(gr.Textbox(label=label, placeholder=placeholder, type="password" if secret else "text",
                                 elem_id=f"submit-{name}"))
        marks.append(gr.Markdown(visible=False, elem_id=f"error-{name}", elem_classes=["field-error"]))
    button = gr.Button("Submit", variant="primary")
    result = gr.Markdown(elem_id="submit-result")
    errors = gr.State({})
    button.click(submit, inputs, [result, errors], api_name="submit", concurrency_limit=2,
                 concurrency_id="submit").then(show, errors, [*marks, status], api_name=False)

    gr.Markdown("### Reviews written elsewhere\nA JSON Lines file, one object per paper: `paper_id`, `review` and "
                "optionally `generated_at` (ISO 8601), see docs/candidates.md. Up to "
                f"{UPLOAD_MAX_BYTES // 2**20} MB and 100 kB per review. Every line is checked: a file with any bad "
                "line is refused whole and the bad lines are listed. Without a cutoff, only reviews generated before "
                "a paper's reviews were public count. The same limits hold (uploads and submissions together).")
    i_fields: list[Any] = [gr.Textbox(label="Candidate name (imported reviews)", elem_id="import-candidate")]
    i_marks = [gr.Markdown(visible=False, elem_id="error-candidate", elem_classes=["field-error"])]
    i_fields.append(gr.Textbox(label="Contact for the import (e-mail or handle)", elem_id="import-contact"))
    i_marks.append(gr.Markdown(visible=False, elem_id="error-import-contact", elem_classes=["field-error"]))
    i_fields.append(gr.Textbox(label="Model's training-data cutoff (YYYY-MM-DD, optional)", elem_id="import-cutoff"))
    i_marks.append(gr.Markdown(visible=False, elem_id="error-import-cutoff", elem_classes=["field-error"]))
    i_fields.append(gr.Textbox(label="Model or system (optional)"))
    i_fields.append(gr.Textbox(label="Description (optional)"))
    i_fields.append(gr.File(label="Reviews (.jsonl)", file_types=[".jsonl"], type="filepath"))
    i_marks.append(gr.Markdown(visible=False, elem_id="error-file", elem_classes=["field-error"]))
    i_button = gr.Button("Queue import")
    i_result = gr.Textbox(label="Import result", lines=6, interactive=False, elem_id="import-result")
    i_errors = gr.State({})
    i_button.click(submit_import, i_fields, [i_result, i_errors], api_name="submit_import", concurrency_limit=2,
                   concurrency_id="submit").then(show_import, i_errors, [*i_marks, status], api_name=False)
    return status, allowance


def upload_path(upload: Any) -> str | None:
    """The server-side path Gradio gives an uploaded file (a str, or an object with ``name``/``path``)."""
    if upload is None or isinstance(upload, str):
        return upload
    for attr in ("path", "name"):
        value = upload.get(attr) if isinstance(upload, dict) else getattr(upload, attr, None)
        if isinstance(value, str):
            return value
    return None


__all__ = ["FIELDS", "build_submit_tab", "field_errors", "upload_path"]
