"""Preprocessors: reviews → judgment lines, cached per (text hash, preprocessor id) in ``judgments``.

Three kinds, resolved from a spec string: ``rules`` (deterministic fallback, id ``rules-v1``), ``litellm:MODEL``
(an LLM rewrite through :class:`grebench.llm.LLMClient`, id ``litellm:MODEL@preprocess-v2``, output validated and
repaired by :mod:`grebench.scoring._judgment_lines`) and ``imported`` (lines that came with an archive, id
``imported:<their preprocessor>``).  Scores made with different ids are never compared.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Protocol

from grebench.registry import Entry, PartId, Registry
from grebench.scoring._judgment_lines import parse_judgment_output
from grebench.scoring._rules import RULES_ID, rules_judgment_lines
from grebench.store import Store, utcnow

if TYPE_CHECKING:
    from grebench.settings import Settings

PREPROCESS_PROMPT_VERSION = "preprocess-v2"  # v2: the review is fenced (grebench.llm.fenced_block)


@dataclass(frozen=True)
class Judgment:
    """The preprocessed form of one text: ok with its lines, or rejected/failed/missing with a reason."""

    status: str
    lines: tuple[str, ...] = ()
    error: str | None = None

    @property
    def text(self) -> str:
        """The lines as the estimator sees them."""
        return "\n".join(self.lines)


class Preprocessor(Protocol):
    """Turns review texts into judgment lines; ``id`` names everything that changes the lines."""

    id: str
    cached: bool

    def preprocess(self, texts: Sequence[str]) -> list[Judgment]:
        """One judgment per text, in order."""
        ...


def text_sha256(text: str) -> str:
    """The cache key of a review text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RulesPreprocessor:
    """The deterministic fallback (see :mod:`grebench.scoring._rules`)."""

    id = RULES_ID
    cached = True

    def preprocess(self, texts: Sequence[str]) -> list[Judgment]:
        """Rule-based lines; a review with no judgment sentence gets an empty (ok) list."""
        return [Judgment("ok", tuple(rules_judgment_lines(t))) for t in texts]


class LLMPreprocessor:
    """An LLM rewrite with the product's prompt; outputs that cannot be repaired are recorded as rejected."""

    cached = True

    def __init__(self, model: str, settings: Settings, store: Store) -> None:
        from grebench.llm import LLMClient

        self.model = model
        self.id = f"litellm:{model}@{PREPROCESS_PROMPT_VERSION}"
        self.settings = settings
        self.client = LLMClient(settings, store)
        self.system = resources.files("grebench.scoring").joinpath("prompts/preprocess_v1.txt").read_text("utf-8")
        self.extra_params: tuple[tuple[str, object], ...] = ()

    def preprocess(self, texts: Sequence[str]) -> list[Judgment]:
        """Validated lines per text (LLM calls are cached by the client as well)."""
        from grebench.llm import ChatRequest, fenced_block

        s = self.settings
        requests = [ChatRequest(model=self.model,
                                messages=(("system", self.system), ("user", fenced_block("REVIEW", text))),
                                purpose="preprocess", prompt_version=PREPROCESS_PROMPT_VERSION,
                                api_base=s.scoring.scoring_llm_api_base or None,
                                api_key_env=s.scoring.scoring_llm_api_key_env or None,
                                params=(("temperature", 0), *self.extra_params))
                    for text in texts]
        out = []
        for result in self.client.complete_many(requests):
            if result.status != "ok" or result.text is None:
                out.append(Judgment("failed", (), result.error or "the LLM call failed"))
                continue
            parsed = parse_judgment_output(result.text)
            out.append(Judgment("ok", tuple(parsed.lines)) if parsed.ok else Judgment("rejected", (), parsed.error))
        return out


class ImportedPreprocessor:
    """Judgment lines stored with the reviews by an archive import, matched by the review text."""

    cached = False

    def __init__(self, store: Store, name: str) -> None:
        self.id = f"imported:{name}"
        self._by_sha: dict[str, tuple[str, ...]] = {}
        for row in store.rows(
            """SELECT v.text, v.judgments_json FROM review_versions v JOIN reviews r
               ON r.review_id = v.review_id AND r.latest_version = v.version
               WHERE v.judgments_json IS NOT NULL AND v.judgments_preprocessor = ?""", [name]):
            lines = json.loads(row["judgments_json"])
            self._by_sha[text_sha256(row["text"])] = tuple(str(x) for x in lines)

    def preprocess(self, texts: Sequence[str]) -> list[Judgment]:
        """Stored lines, or ``missing`` for a text that came without them (every generated review)."""
        return [Judgment("ok", self._by_sha[sha]) if (sha := text_sha256(t)) in self._by_sha
                else Judgment("missing", (), "no imported judgment lines for this text") for t in texts]


def imported_preprocessor_names(store: Store) -> dict[str, int]:
    """How many current review versions carry imported lines, per preprocessor name (None = without lines)."""
    rows = store.rows(
        """SELECT CASE WHEN v.judgments_json IS NULL THEN NULL ELSE coalesce(v.judgments_preprocessor, 'unknown')
                  END AS name, count(*) AS n
           FROM review_versions v JOIN reviews r ON r.review_id = v.review_id AND r.latest_version = v.version
           GROUP BY 1""")
    return {row["name"]: int(row["n"]) for row in rows}


PreprocessorFactory = Callable[[str, "Settings", Store], Preprocessor]
@dataclass(frozen=True)
class PreprocessorInfo:
    """The facts of a kind of preprocessor.  ``label``: the words for one of its ids (None: the shortened id).
    ``check_arg``: validates an ARG before any work (the setup check calls it), raising ``ValueError(reason)``;
    None: any ARG passes."""

    name: str
    label: Callable[[str], str] | None = None
    check_arg: Callable[[str], None] | None = None


#: Registered preprocessors (``rules``, ``litellm:MODEL``, ``imported[:NAME]``, plugins'); an entry's facts are a
#: :class:`PreprocessorInfo`.
PREPROCESSORS: Registry[PreprocessorFactory] = Registry("preprocessor", facts=PreprocessorInfo)


def _litellm_label(preprocessor_id: str) -> str:
    from grebench.models import model_title

    return f"LLM preprocessor ({model_title(PartId.parse(preprocessor_id).model)})"


def _imported_label(preprocessor_id: str) -> str:
    name = PREPROCESSORS.split(preprocessor_id)[1]
    return f"imported judgment lines ({name if len(name) <= 40 else name[:39] + '…'})" if name else \
        "imported judgment lines"


def _check_rules_arg(arg: str) -> None:
    if arg:
        raise ValueError(f"the rules preprocessor takes no argument (write `rules` or `{RULES_ID}`), got rules:{arg}")


def _check_litellm_arg(arg: str) -> None:
    if not PartId.parse(f"litellm:{arg}").model:
        raise ValueError("litellm preprocessor spec must be litellm:MODEL (a litellm model string)")


@PREPROCESSORS.register("rules", spec="rules", summary=f"deterministic judgment lines ({RULES_ID}), no LLM",
                        label=lambda _id: "rules preprocessor", check_arg=_check_rules_arg)
def _rules(arg: str, settings: Settings, store: Store) -> Preprocessor:
    return RulesPreprocessor()


@PREPROCESSORS.register("litellm", spec="litellm:MODEL", summary="an LLM rewrites each review into judgment lines",
                        label=_litellm_label, check_arg=_check_litellm_arg)
def _litellm(arg: str, settings: Settings, store: Store) -> Preprocessor:
    _check_litellm_arg(arg)
    model = PartId.parse(f"litellm:{arg}").model
    return LLMPreprocessor(model, settings, store)


@PREPROCESSORS.register("imported", spec="imported[:NAME]", summary="judgment lines that came with an archive",
                        label=_imported_label)
def _imported(arg: str, settings: Settings, store: Store) -> Preprocessor:
    names = imported_preprocessor_names(store)
    with_lines = {k: v for k, v in names.items() if k is not None}
    if not with_lines:
        raise ValueError("--preprocessor imported: no review in the store has imported judgment lines "
                         "(import an archive with `judgments`, or use rules or litellm:MODEL)")
    if not arg and len(with_lines) > 1:
        detail = ", ".join(f"{k}: {v} reviews" for k, v in sorted(with_lines.items()))
        raise ValueError(f"--preprocessor imported: the imported lines come from several preprocessors ({detail}); "
                         "name one with imported:NAME")
    name = arg or next(iter(with_lines))
    if name not in with_lines:
        raise ValueError(f"--preprocessor imported:{arg}: no imported lines from {name!r} (found {sorted(with_lines)})")
    return ImportedPreprocessor(store, name)


def preprocessor_entry(spec: str) -> tuple[Entry[PreprocessorFactory], str]:
    """The registration and argument of a preprocessor spec (``NAME[:ARG]``; the current rules id, e.g.
    ``rules-v6``, names ``rules``)."""
    spec = spec.strip()
    return PREPROCESSORS.resolve("rules" if spec == RULES_ID else spec)


def resolve_preprocessor(spec: str, settings: Settings, store: Store) -> Preprocessor:
    """The preprocessor named by ``spec`` (see :func:`preprocessor_entry`)."""
    entry, arg = preprocessor_entry(spec)
    return entry.obj(arg, settings, store)


def preprocess_texts(store: Store, preprocessor: Preprocessor, texts: Sequence[str],
                     progress: Callable[[int], None] | None = None, chunk: int = 200) -> dict[str, Judgment]:
    """Judgments for every text, keyed by its sha256: from the cache, else computed and cached."""
    by_sha = {text_sha256(t): t for t in texts}
    out: dict[str, Judgment] = {}
    if preprocessor.cached and by_sha:
        for row in store.rows(
                """SELECT text_sha256, lines_json, status, error FROM judgments
                   WHERE preprocessor = ? AND text_sha256 IN (SELECT unnest(?::VARCHAR[]))""",
                [preprocessor.id, list(by_sha)]):
            if row["status"] == "ok":  # rejected/failed outputs are retried on the next run
                out[row["text_sha256"]] = Judgment("ok", tuple(json.loads(row["lines_json"] or "[]")))
    todo = [sha for sha in by_sha if sha not in out]
    if progress is not None and out:
        progress(len(out))  # cached texts count as done: a finished task ends at 100 %, never "(done)" at 66 %
    for start in range(0, len(todo), chunk):
        shas = todo[start:start + chunk]
        results = preprocessor.preprocess([by_sha[s] for s in shas])
        out.update(zip(shas, results, strict=True))
        if preprocessor.cached:
            _save(store, preprocessor.id, shas, results)
        if progress is not None:
            progress(len(shas))
    return out


def _save(store: Store, preprocessor_id: str, shas: Sequence[str], results: Sequence[Judgment]) -> None:
    store.con.execute(
        """INSERT OR REPLACE INTO judgments
           SELECT unnest(?::VARCHAR[]), ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), ?""",
        [list(shas), preprocessor_id, [json.dumps(list(r.lines), ensure_ascii=False) for r in results],
         [r.status for r in results], [r.error for r in results], utcnow()])
