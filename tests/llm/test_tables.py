"""One parser of endpoint tables: ``[[candidates]]`` and ``[[judges]]`` refuse the same faults in the same words."""

from __future__ import annotations

from typing import Any

import pytest

from grebench.bench import CandidateError, load_candidates
from grebench.llm import LLMClient, endpoint_tables, parse_endpoint, table_name
from grebench.panel import JudgeContext, parse_judges
from grebench.settings import Settings

GOOD = {"name": "m1", "model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY", "params": {"max_tokens": 100}}


def _candidate_error(settings: Settings, raw: Any) -> str:
    with pytest.raises(CandidateError) as caught:
        load_candidates(Settings(values=settings.values, tables={"candidates": raw}, config_path=None))
    return str(caught.value).replace("[[candidates]]", "[[T]]").replace("candidate 'm1'", "'m1'")


def _judge_error(settings: Settings, raw: Any) -> str:
    context = JudgeContext(settings, LLMClient(settings), lambda _paper, _review: None, local_judges=())
    with pytest.raises(ValueError) as caught:
        parse_judges(raw, context)
    return str(caught.value).replace("[[judges]]", "[[T]]").replace("judge 'm1'", "'m1'")


@pytest.mark.parametrize(("raw", "message"), [
    ("not tables", "must be an array of tables"),
    (["not a table"], "[[T]] #1: expected a table, got str"),
    ([{**GOOD, "name": "bad name!"}], "[[T]] #1: name must be 1-100 characters of letters, digits and ._:/@+-"),
    ([{**GOOD, "model": " "}], "'m1': missing model (a litellm model string such as 'openai/gpt-4o-mini')"),
    ([{**GOOD, "api_key_env": "sk-123"}], "'m1': api_key_env must be the NAME of an environment variable, not the key"),
    ([{**GOOD, "family": 3}], "'m1': family must be a string"),
    ([{**GOOD, "params": 3}], "'m1': params must be a table"),
])
def test_candidates_and_judges_refuse_the_same_fault_alike(settings: Settings, raw: Any, message: str) -> None:
    candidate = [{**t, "cutoff": "2023-10-01"} if isinstance(t, dict) else t for t in raw] \
        if isinstance(raw, list) else raw
    assert message in _candidate_error(settings, candidate)
    assert message in _judge_error(settings, raw)


def test_the_parser_names_the_table_the_entry_and_the_allowed_keys() -> None:
    assert endpoint_tables(None, "judges") == [] and endpoint_tables({"name": "a"}, "judges") == [{"name": "a"}]
    assert table_name({"name": "a.b-c"}, "[[judges]] #1") == "a.b-c"
    with pytest.raises(ValueError, match=r"judge 'a': unknown key\(s\) colour \(allowed: model, name\)"):
        parse_endpoint({"name": "a", "model": "m", "colour": "red"}, "judge 'a'", {"name", "model"})
    endpoint = parse_endpoint({"name": "a", "model": " openai/x "}, "judge 'a'", {"name", "model"})
    assert (endpoint.model, endpoint.params, endpoint.api_key_env) == ("openai/x", {}, None)
