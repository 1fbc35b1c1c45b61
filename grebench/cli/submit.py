"""`grebench submit`: queue a model endpoint from the command line, through the same server-side checks as the app.

The API key is never a command-line argument (it would show in ``ps`` and shell history): ``--api-key-env`` names
an environment variable that holds it, and it is accepted only with ``GREBENCH_SECRET_KEY`` set, because a key
held in this short-lived process's memory would be gone before the scheduler could use it.
"""

from __future__ import annotations

import os

import click

from grebench.cli._common import emit_json
from grebench.cli._dates import Day
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("submit")
@click.option("--name", "model_name", required=True, help="Model name (becomes the candidate name).")
@click.option("--model", "model_string", default="", help="litellm model string (hosted providers), e.g. openai/x.")
@click.option("--base-url", default="", help="OpenAI-compatible base URL (https, public address).")
@click.option("--released", default="", type=Day(), help="Release date YYYY-MM-DD.")
@click.option("--cutoff", required=True, type=Day(), help="Training-data cutoff YYYY-MM-DD (shown, not trusted until "
              "the operator runs `grebench submissions approve ID`).")
@click.option("--contact", required=True, help="E-mail address or handle of the submitter.")
@click.option("--api-key-env", default=None, help="NAME of an environment variable holding the API key.")
@click.option("--params", default="", help='Generation parameters as JSON, e.g. {"temperature": 0.7}.')
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, model_name: str, model_string: str, base_url: str, released: str, cutoff: str,
            contact: str, api_key_env: str | None, params: str, as_json: bool) -> None:
    """Queue a model for evaluation (the scheduler's queue job evaluates it)."""
    from grebench.endpoints import KeyVault
    from grebench.submissions import SubmissionForm, SubmissionQueue, queue_path

    try:
        vault = KeyVault()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    key = ""
    if api_key_env:
        key = os.environ.get(api_key_env, "")
        if not key:
            raise click.ClickException(f"environment variable {api_key_env} is empty or not set")
        if not vault.encrypted_at_rest:
            raise click.ClickException("an API key can be queued from the command line only with GREBENCH_SECRET_KEY "
                                       "set (it is stored encrypted for the scheduler)")
    form = SubmissionForm(model_name=model_name, model_string=model_string, base_url=base_url, released=released,
                          cutoff=cutoff, contact=contact, api_key=key, params=params)
    result = SubmissionQueue(queue_path(settings)).submit(form, settings, vault)
    if as_json:
        emit_json(result)
    else:
        click.echo(result["message"])
    if not result["ok"]:
        raise SystemExit(1)

