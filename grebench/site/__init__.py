"""The site stage: the static leaderboard site, the Gradio app, and model-endpoint submissions.

Public API (importing it never imports gradio; the app lives in :mod:`grebench.site._app`, loaded lazily):

* :func:`build_site` — render the static site from the store (``grebench site build``, last step of ``run``).
* :func:`check_url`, :class:`PinnedEndpoint`, :func:`pinned_transport` — the SSRF guard for submitted URLs and
  the HTTP transport the bench stage must use to call a submitted endpoint.
* :class:`SubmissionQueue`, :func:`accept_queued_submissions`, :func:`finish_submission`, :class:`KeyVault` —
  the submission queue and its hand-over to the bench stage.
"""

from grebench.site._build import SCHEMA_VERSION, build_site, leaderboard_json
from grebench.site._pinned import pinned_async_transport, pinned_transport
from grebench.site._secrets import KeyVault, Secret
from grebench.site._submissions import (
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    accept_queued_submissions,
    finish_submission,
    validate_submission,
)
from grebench.site._urlcheck import (
    PinnedEndpoint,
    URLRejected,
    check_redirect,
    check_submitted_url,
    check_url,
    own_service_urls,
)


def create_app(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Build the Gradio app (imports gradio only when called); see :func:`grebench.site._app.create_app`."""
    from grebench.site._app import create_app as _create

    return _create(*args, **kwargs)


__all__ = [
    "SCHEMA_VERSION",
    "KeyVault",
    "PinnedEndpoint",
    "Secret",
    "SubmissionError",
    "SubmissionForm",
    "SubmissionQueue",
    "URLRejected",
    "accept_queued_submissions",
    "build_site",
    "check_redirect",
    "check_submitted_url",
    "check_url",
    "create_app",
    "finish_submission",
    "leaderboard_json",
    "own_service_urls",
    "pinned_async_transport",
    "pinned_transport",
    "validate_submission",
]
