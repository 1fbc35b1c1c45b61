"""One settings object for the whole product, in sections.

Every setting is declared exactly once, as a typed attribute (``seed = Setting(int, ...)``) with its default, help
text and what it accepts: the general ones (data directory, logging, seed) on :class:`Settings` itself, the rest in
one :class:`Section` per domain (``ingest``, ``limits``, ``bench``, ``scoring``, ``panel``, ``app``,
``submissions``, ``service``, ``run``), read as ``settings.scoring.estimator`` or, by a component that is handed only
its section, ``scoring.estimator``.  :data:`SECTIONS` lists the sections and :data:`SETTINGS` every setting, in
declaration order; a setting's name is unique across sections, so environment variables, ``--OPTION``s and
:meth:`Settings.replace` name it alone.  ``settings.seed`` is an ``int`` to mypy and at run time (no call site
converts), and the data directory's layout is a set of properties (``settings.export_path``, ...).  Values come
from, in increasing priority:

1. the declared default,
2. a TOML file (``--config PATH`` or ``GREBENCH_CONFIG``): a setting at the top of the file (as before sections
   existed) or under its section's table (``[scoring]`` then ``estimator = ...``),
3. ``GREBENCH_<NAME>`` environment variables.

The reference tables of ``docs/configuration.md`` are generated from the declarations (``python -m
grebench.settings``); a test keeps them equal.

Candidate models are declared as ``[[candidates]]`` tables in the TOML file
(see ``docs/configuration.md``); they are parsed by :mod:`grebench.bench`.
"""

from __future__ import annotations

import difflib
import os
import sys
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Generic, Iterable, Mapping, TypeVar, overload

ENV_PREFIX = "GREBENCH_"
T = TypeVar("T")


def _num(x: float | None) -> str:
    return "" if x is None else f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


class Setting(Generic[T]):
    """Declaration of one setting (a typed attribute of :class:`Settings`): its type, default, help text and what it
    accepts.  Read on a :class:`Settings` it is the value (of type ``T``); read on the class it is the declaration."""

    def __init__(self, type: type[T], default: T, help: str, *, choices: tuple[str, ...] = (),
                 minimum: float | None = None, maximum: float | None = None) -> None:
        self.name = ""                 # the attribute's name (set when the class is made)
        self.section = ""              # the key of its section ("" for the general settings on Settings itself)
        self.type = type
        self.default = default
        self.help = help
        self.choices = choices         # allowed values (case-insensitive), when the setting is an enumeration
        self.minimum = minimum         # inclusive bounds of a number
        self.maximum = maximum

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.section = str(getattr(owner, "key", ""))

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Setting[T]: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> Setting[T] | T:
        if obj is None:
            return self
        value: T = obj.values[self.name]  # type: ignore[attr-defined]
        return value

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, {self.type.__name__}, {self.default!r})"

    def accepts(self) -> str:
        """What the declaration allows, in words (``one of: a, b``, ``between 1 and 65,535``); empty when every value
        of its type goes.  The refusals of :meth:`check` and the CLI's option help say it the same way."""
        if self.choices:
            return f"one of: {', '.join(self.choices)}"
        low, high = self.minimum, self.maximum
        if low is None and high is None:
            return ""
        return (f"between {_num(low)} and {_num(high)}" if low is not None and high is not None else
                f"at least {_num(low)}" if low is not None else f"at most {_num(high)}")

    def check(self, value: Any, origin: str) -> None:
        """Refuse a value outside the declared choices or bounds, naming the setting, the value and what is allowed."""
        if self.choices and str(value).strip().lower() not in {c.lower() for c in self.choices}:
            raise ValueError(f"{origin}: {self.name} = {value!r} is not allowed; {self.accepts()}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low, high = self.minimum, self.maximum
            if (low is not None and value < low) or (high is not None and value > high):
                raise ValueError(f"{origin}: {self.name} = {value!r} is out of range; it must be {self.accepts()}")

    def parse(self, value: Any, origin: str) -> T:
        """``value`` (text from a file, the environment or the command line) as the setting's type, checked against
        the declaration; a :class:`ValueError` naming ``origin`` otherwise."""
        parsed: T = _coerce(self, value, origin)
        return parsed


def _coerce(setting: Setting[Any], value: Any, origin: str) -> Any:
    """Convert ``value`` to the setting's type, with an error that names its origin."""
    if setting.type is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off"}:
            return False
        raise ValueError(f"{origin}: {setting.name} must be true or false, got {value!r}")
    if setting.type in (int, float) and isinstance(value, bool):
        raise ValueError(f"{origin}: {setting.name} must be {setting.type.__name__}, got {value!r}")
    try:
        converted = setting.type(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{origin}: {setting.name} must be {setting.type.__name__}, got {value!r}") from exc
    if setting.type is int and isinstance(value, float) and value != converted:
        raise ValueError(f"{origin}: {setting.name} must be a whole number, got {value!r}")
    setting.check(converted, origin)
    return converted


@dataclass(frozen=True)
class Section:
    """One domain's settings: typed attributes (:class:`Setting` declarations) read from the resolved values.

    A section is what a component is handed when it needs only its own domain (``AppSettings`` for the app's
    listener, ``IngestSettings`` for a source); :attr:`key` names its table in a settings file and its attribute on
    :class:`Settings`."""

    key: ClassVar[str] = ""
    values: Mapping[str, Any]

    @classmethod
    def declared(cls) -> tuple[Setting[Any], ...]:
        """The section's settings, in declaration order."""
        return tuple(v for v in vars(cls).values() if isinstance(v, Setting))


@dataclass(frozen=True)
class RunSettings(Section):
    """What the main job works on, and where its scoring runs (this process or a Ray cluster)."""

    key: ClassVar[str] = 'run'

    papers = Setting(str, 'auto', 'Papers the main job works on: all, N for a seeded sample stratified by venue and human rating, or auto (on a CPU with a local language model, as many papers (3 to 12) as fit about 15 minutes at the throughput measured here; every paper on a GPU or with no local model); the plan gives the expected time measured on the machine at hand.')
    validation = Setting(str, 'auto', 'What the main job checks besides the headline board: core (GEM-S only, with the human baseline, every contestant and the five core controls: one of each thing a reader needs to trust the board; docs/scoring.md#the-core-controls), full (every default control, and GEM as well as GEM-S: the metric validation of methods.md §4), auto (core on a CPU when papers = auto sizes the sample, else full: on a GPU, with papers = all or N).', choices=('auto', 'core', 'full'))
    executor = Setting(str, 'local', "Where the heavy work runs: local (in this process and its children) or ray (on a Ray cluster; needs `pip install -e '.[hf,ray]'`): scoring with an in-process evaluation LM (hf:..., offline) on Ray actors, each holding its own copy of the estimator built from the same spec and settings; local candidates' reviews (local_generation = batch) decoded on Ray actors, a batch of the same plan each; PDF extraction (ingest) as Ray tasks on the cluster's CPUs. Server estimators (vllm:, sglang:, vllm-local:) stream through their dispatcher either way; the store is written by this process alone.", choices=('local', 'ray'))
    ray_address = Setting(str, '', "The Ray cluster of executor = ray: empty starts a local Ray on this machine for the job (and stops it after), auto joins the one `ray start` runs here, ray://HOST:10001 a remote cluster's client port.")
    ray_actors = Setting(int, 0, "Actors of executor = ray, each with its own copy of the model (the estimator, or a local candidate's checkpoint): 0 = one per CPU the cluster has, or one per GPU when the model runs on a GPU.", minimum=0, maximum=4096)


@dataclass(frozen=True)
class IngestSettings(Section):
    """Fetching papers and reviews (OpenReview, archives) and extracting PDFs."""

    key: ClassVar[str] = 'ingest'

    openreview_baseurl_v1 = Setting(str, 'https://api.openreview.net', 'OpenReview API v1 base URL (venues up to ICLR 2023).')
    openreview_baseurl_v2 = Setting(str, 'https://api2.openreview.net', 'OpenReview API v2 base URL (ICLR 2024 on).')
    openreview_api = Setting(str, 'auto', 'Which OpenReview API to use: auto (by venue year), v1 or v2.', choices=('auto', 'v1', 'v2'))
    openreview_max_wait_s = Setting(float, 300.0, 'Upper bound on the total time spent waiting on 429 Retry-After during one ingest.', minimum=0)
    openreview_max_retries = Setting(int, 4, 'Retries of one OpenReview request on 429/5xx/connection errors before it is recorded as failed.', minimum=0, maximum=100)
    openreview_timeout_s = Setting(float, 60.0, 'Timeout of one OpenReview HTTP request.', minimum=0.1)
    fetch_pdfs = Setting(bool, True, 'Download and extract PDFs when ingesting from OpenReview.')
    link_estimator = Setting(str, 'offline', "Evaluation LM that reads the titles and abstracts of the candidate pairs of papers that nothing else links when versions of a work are linked (ingest, `grebench links`; issue 62): a pair it reads as the same work beyond what distinct papers of one venue reach (the bar: the 99.9 % quantile x 1.1 of the venue's own candidate pairs) is flagged as a possible link, so the paper's reviews are not sealed until the operator decides. An estimator spec: offline (the word model fitted on the store's abstracts: about a second per 1,000 pairs), hf:smollm2-135m, vllm:URL, ...; empty: off (title, abstract words, text fingerprints, authors and keywords still link).")


@dataclass(frozen=True)
class LimitSettings(Section):
    """What outside input and outside calls may cost: sizes ingest accepts, the PDF extractor's sandbox, every LLM call's deadline, retries and answer size, and a snapshot import's size."""

    key: ClassVar[str] = 'limits'

    ingest_max_line_bytes = Setting(int, 4194304, "Largest archive line (one paper with its reviews) ingest reads; a longer line is refused with its line number (the bundled samples' largest is 27 kB).", minimum=1024)
    ingest_max_title_chars = Setting(int, 1000, 'Longest title ingest accepts; a paper over it is refused with its line or id and the reason.', minimum=1)
    ingest_max_abstract_chars = Setting(int, 20000, 'Longest abstract ingest accepts (bundled samples: at most 2,457 characters).', minimum=1)
    ingest_max_review_chars = Setting(int, 100000, 'Longest review text ingest accepts (bundled samples: at most 15,701 characters; `bench import` takes 100 kB too).', minimum=1)
    ingest_max_reviews_per_paper = Setting(int, 50, 'Most reviews ingest accepts for one paper (bundled samples: at most 5).', minimum=1)
    ingest_max_papers = Setting(int, 200000, 'Most papers ingest reads from one archive; the lines after that are refused (recorded once).', minimum=1)
    pdf_timeout_s = Setting(float, 60.0, 'Wall-clock limit for extracting one PDF (the extractor runs in a subprocess).', minimum=0.1)
    pdf_memory_mb = Setting(int, 2048, 'Address-space limit of the PDF extraction subprocess, in MiB.', minimum=64)
    pdf_max_bytes = Setting(int, 50000000, 'PDFs larger than this are refused without parsing.', minimum=1)
    llm_timeout_s = Setting(float, 600.0, 'Outer deadline of one LLM call to a remote endpoint, including a stream that goes silent.', minimum=0.01)
    llm_idle_timeout_s = Setting(float, 600.0, 'A call to a local model server grebench started (local candidates and judges) is given up only when no data arrived for this long: a slow CPU still streaming tokens is never cut off by a total deadline.', minimum=0.01)
    llm_max_retries = Setting(int, 3, 'Retries of one LLM call on 429/5xx/timeouts.', minimum=0, maximum=100)
    llm_max_response_chars = Setting(int, 200000, 'Cap on the size of one LLM response; longer output is cut and flagged.', minimum=1)
    llm_max_retry_after_s = Setting(float, 60.0, 'Largest Retry-After honoured for an LLM call; longer waits count as a failure.', minimum=0)
    snapshot_import_max_expansion = Setting(int, 50, 'A snapshot being imported may decode to at most this many times the bytes of its Parquet files, all members together (at least 16 MiB; a manifest\'s decoded_bytes can only lower it).', minimum=1, maximum=10000)
    snapshot_import_max_mb = Setting(int, 2048, 'Most MiB a snapshot being imported may decode to, all members together, whatever its file sizes or manifest say.', minimum=16, maximum=1048576)


@dataclass(frozen=True)
class BenchSettings(Section):
    """Candidate reviews: the candidates' calls, the local candidates and the controls."""

    key: ClassVar[str] = 'bench'

    bench_concurrency = Setting(int, 4, 'Concurrent LLM calls per provider when generating candidate reviews.', minimum=1, maximum=256)
    context_tokens = Setting(int, 32000, 'Default context window (tokens) of a candidate model when its params do not say.', minimum=512)
    control_model = Setting(str, '', 'litellm model for the LLM-made controls (deletion-completion, rephrase, abstract-only); empty: skip them.')
    local_candidates = Setting(str, 'smollm2-135m', 'Built-in local candidates: comma-separated catalogue names (`grebench models list`) that write reviews as kind = "local" candidates, served by transformers serve on 127.0.0.1 (empty: none).')
    local_server_startup_s = Setting(float, 300.0, 'Upper bound on the start of a local model server (transformers serve) before it answers /health; it only catches a hung server: readiness is observed, never timed.', minimum=0.1)
    local_streams = Setting(int, 0, 'Calls sent at once to a local model server on a CPU (its continuous batching shares each decoding step across them); 0 = as many as have their prompts read within 0.4 x llm_idle_timeout_s at the tokens/s measured on this machine, at most 16.', minimum=0, maximum=256)
    local_server_port = Setting(int, 0, 'Port of a local model server on 127.0.0.1 (0 = a free port chosen by the OS on every start).', minimum=0, maximum=65535)
    local_generation = Setting(str, 'batch', 'How kind = "local" candidates write their reviews: batch (in this process, every paper still to review decoded together in a deterministic batch plan recorded with each generation; docs/candidates.md#local-models), server (one transformers serve request per paper, as an endpoint).', choices=('batch', 'server'))
    local_batch_mib = Setting(int, 384, 'KV-cache budget of local models on a CPU, in MiB: one batch of local generation (rows × (longest prompt + max_tokens) × the model\'s bytes per token; the batch plan depends on it, not on free memory, so a rerun plans the same batches) and the batching cache of a local candidate\'s server (as many full-context calls at once as fit; a local judge\'s server has none: its decisions are single forward passes).', minimum=16)


@dataclass(frozen=True)
class ScoringSettings(Section):
    """The evaluation LM (estimators and their engines), preprocessing and the boards' statistics."""

    key: ClassVar[str] = 'scoring'

    estimator = Setting(str, 'hf:smollm2-135m', 'Evaluation-LM estimator: offline (a fast word-model proxy), hf:NAME (a built-in evaluation LM, `grebench models list`) or hf:PATH, vllm:URL[,URL...] (running vLLM servers), vllm-local:NAME|PATH (vLLM servers started here, vllm_python), sglang:URL[,URL...] (running SGLang servers, or one sglang-router).')
    preprocessor = Setting(str, 'rules', 'Judgment-line preprocessor: rules, imported or litellm:MODEL.')
    assw_model = Setting(str, '', 'litellm model that summarises the strengths/weaknesses a paper claims (GEM-S ASSW); empty: ASSW skipped.')
    scoring_llm_api_base = Setting(str, '', "OpenAI-compatible base URL for the preprocessing and ASSW LLMs (empty: the provider's default).")
    scoring_llm_api_key_env = Setting(str, '', 'Name of the environment variable holding the API key of the preprocessing and ASSW LLMs.')
    proxy_estimator = Setting(str, 'offline', 'A fast proxy estimator scored on the same pairs as the main one (its boards are labelled fast proxy; validate reports how well it agrees with the main estimator). Empty: none.')
    attribution = Setting(str, 'auto', 'Per-line attribution of scores (what each judgment line of a review adds, by leaving it out: one extra evaluation-LM request per line, reference and metric; docs/scoring.md): auto (fast proxy estimators only, e.g. offline), off, leave-one-out (every estimator).', choices=('auto', 'off', 'leave-one-out'))
    estimator_concurrency = Setting(int, 8, 'Requests in flight to each vLLM/SGLang evaluation-LM server (each server has its own slots; a request is sent the moment one frees).', minimum=1, maximum=1024)
    estimator_batch = Setting(int, 4, 'Requests of one paper sent in one HTTP call to a vLLM/SGLang server (both take a list of prompts); estimator_concurrency still counts requests, so each server has concurrency / batch calls in flight. 1: one request a call.', minimum=1, maximum=256)
    estimator_routing = Setting(str, 'paper', 'How requests are spread over several vLLM/SGLang URLs: paper (every request of a paper on one server, placed by rendezvous hashing with bounded loads, so its prefix cache computes the shared prompt prefix once; idle servers take papers not yet started), round-robin (request by request, for comparison).', choices=('paper', 'round-robin'))
    estimator_tokenizer = Setting(str, '', 'Local tokenizer dir of a vllm/sglang evaluation-LM (default: the served model id as a path).')
    estimator_timeout_s = Setting(float, 300.0, 'Timeout of one request to a vLLM/SGLang evaluation-LM server.', minimum=0.1)
    hf_dtype = Setting(str, 'auto', 'Torch dtype of the hf estimator and of local model servers: auto (bfloat16 on CUDA; on a CPU a measured probe picks bfloat16 only where it is ≥ 1.3× faster and within 0.05 nats of float32, cached per machine), float32, bfloat16, float16.', choices=('auto', 'float32', 'bfloat16', 'float16'))
    hf_device = Setting(str, 'auto', 'Torch device of the hf estimator and of local model servers (auto: a GPU when there is one, cpu, cuda).')
    hf_batch_tokens = Setting(int, 16384, 'Token budget of one hf estimator batch.', minimum=256)
    hf_batch_mib = Setting(int, 160, 'Memory budget of one hf estimator batch beside the weights, in MiB: each row\'s copy of its cached context, its attention scores and activations (a token budget alone let the first run reach 7.7 GB); batches are cut by both.', minimum=16)
    hf_prefix_reuse = Setting(str, 'auto', 'Prefix KV reuse of the hf estimator: auto (measured once per machine, device and model: reuse where it is >= 1.1x faster than a plain forward batched across papers and within 0.05 nats per 100 scored tokens of it; docs/estimators.md), on, off.', choices=('auto', 'on', 'off'))
    vllm_python = Setting(str, '', 'Interpreter of the environment vLLM is installed in (scripts/install-vllm.sh prints it; vLLM pins an older transformers than grebench, so it cannot share this one); used by the vllm-local estimator.')
    vllm_servers = Setting(int, 1, 'vLLM servers the vllm-local estimator starts on this machine (requests are spread over them; on a CPU each gets its share of the cores, on GPUs each its own GPU).', minimum=1, maximum=64)
    vllm_kv_cache_gib = Setting(float, 0.0, "KV-cache memory of each vllm-local server, GiB (vLLM's --kv-cache-memory-bytes); 0 = 2 GiB on a CPU (vLLM's CPU build would otherwise reserve 92% of the RAM and refuse to start on a shared machine), vLLM's own sizing on a GPU.", minimum=0, maximum=4096)
    vllm_compile = Setting(bool, True, "Let vllm-local servers torch.compile the model at start (vLLM's default: faster scoring, minutes more start-up on a CPU); false: --enforce-eager.")
    board_max_missing_share = Setting(float, 0.05, "Share of the board papers an operator-configured model was due to review that it may lack a review of and still be ranked (rounded down): room for generations that failed on our side, never enough to choose a sample. Submitted models and imported reviews may miss none.", minimum=0.0, maximum=0.2)
    bootstrap_samples = Setting(int, 2000, 'Bootstrap resamples (over papers) for confidence intervals.', minimum=10, maximum=1000000)


@dataclass(frozen=True)
class PanelSettings(Section):
    """The judge panel: its exam, pairs and debate."""

    key: ClassVar[str] = 'panel'

    panel_pairs_per_paper = Setting(int, 0, 'Pairwise comparisons per paper for the judge panel: every pair of contestants (LLMs, imported reviews, the human baseline), then contestant-vs-control anchor pairs in a seeded order up to this many (0 = all; control-vs-control pairs are never judged).', minimum=0)
    panel_llm_pairs_per_paper = Setting(int, 2, 'The same cap for LLM judges, whose every comparison is a model call (0 = as panel_pairs_per_paper).', minimum=0)
    local_judges = Setting(str, 'smollm2-135m', 'Built-in local LLM judges: comma-separated catalogue names or checkpoint paths that judge pairs through typed decisions (/v1/systemone of a local transformers serve; empty: none).')
    exam_llm_pairs = Setting(int, 12, 'Pairs per exam test for an LLM judge (a bounded, evenly spread part of each seeded test; half as many for the easy and hard sets; 0 = the whole exam).', minimum=0)
    exam_pairs = Setting(int, 100, "Pairs per test of the judges' qualification exam (seeded sample per venue-year).", minimum=0)
    debate_rounds = Setting(int, 2, 'Maximum debate rounds for pairs on which qualified LLM judges disagree.', minimum=0, maximum=10)
    judges_see_machine_metrics = Setting(bool, False, 'Give LLM judges the machine metrics of both reviews as context.')


@dataclass(frozen=True)
class AppSettings(Section):
    """The Gradio app: address, sessions, uploads, request and connection limits."""

    key: ClassVar[str] = 'app'

    app_host = Setting(str, '127.0.0.1', 'Host the Gradio app binds to.')
    app_port = Setting(int, 7860, 'Port of the Gradio app.', minimum=1, maximum=65535)
    app_session_capacity = Setting(int, 256, "Sessions whose state the app keeps in memory (the oldest is dropped first; Gradio's default of 10,000 let memory grow with sessions: docs/reliability.md).", minimum=1)
    app_uploads_per_address_per_hour = Setting(int, 20, "Requests to Gradio's upload route (POST /gradio_api/upload) accepted from one client address per hour, refused ones included.", minimum=1, maximum=10000)
    app_upload_max_files = Setting(int, 200, "Uploaded files kept in Gradio's upload folder at once; further uploads are refused until some are removed.", minimum=1, maximum=100000)
    app_upload_max_bytes = Setting(int, 1073741824, "Bytes of uploaded files kept in Gradio's upload folder at once.", minimum=16777216)
    app_upload_files_per_request = Setting(int, 1, "Files (multipart parts) one request may carry, to the upload route or any other; a request with more is refused before any is stored.", minimum=1, maximum=100)
    app_upload_files_per_address_per_hour = Setting(int, 10, "Each client address's share of the upload space: files it may upload per hour (the space holds app_upload_max_files in all).", minimum=1, maximum=100000)
    app_upload_bytes_per_address_per_hour = Setting(int, 67108864, "Each client address's share of the upload space: bytes of upload requests it may make per hour.", minimum=17825792)
    app_max_body_bytes = Setting(int, 1048576, 'Largest request body any app route accepts (the upload route has its own cap: one file of the import form\'s limit); larger ones are refused with 413 before they are read.', minimum=65536, maximum=16777216)
    app_requests_per_address_per_min = Setting(int, 600, 'HTTP requests (pages, assets, API calls) the app accepts from one client address per minute, in bursts of as many; more are refused with 429.', minimum=10, maximum=1000000)
    app_idle_timeout_s = Setting(int, 10, "Seconds a connection to the app may stay open without sending a request (after a response; after it is accepted, between half of this and all of it, drawn at random so that connections accepted together are not closed together); then it is closed.", minimum=1, maximum=3600)
    app_header_timeout_s = Setting(int, 10, "Seconds a request's headers may take from their first byte to their end; a slower client is disconnected before the app sees the request.", minimum=1, maximum=600)
    app_body_timeout_s = Setting(int, 60, "Seconds a request's whole body may take to arrive (uploads included); a slower body is refused with 408.", minimum=1, maximum=3600)
    app_keep_alive_s = Setting(int, 5, "Seconds an idle keep-alive connection is kept after a response (uvicorn's timeout_keep_alive).", minimum=1, maximum=600)
    app_connections_per_address = Setting(int, 64, "Open connections one client address may hold; more are refused as soon as they are accepted (see app_refused_hold_s) (a trusted proxy's address has only the total cap).", minimum=1, maximum=100000)
    app_refused_hold_s = Setting(int, 30, "Seconds a connection refused by the caps above is held (sent a 503, nothing read; this to twice this, drawn at random so that refusals made together do not come back together) before it is closed, so that a client reconnecting at once cannot keep the listen queue full; 0 closes it at once.", minimum=0, maximum=600)
    app_refused_held = Setting(int, 65536, "Refused connections held at once; beyond this, or beyond the open-file limit less app_max_connections and 256, a refused connection is closed at once.", minimum=0, maximum=1000000)
    app_max_connections = Setting(int, 4096, "Open connections the app holds in all; more are refused as soon as they are accepted. Kept 256 below the process's open-file limit whatever this says.", minimum=16, maximum=1000000)
    app_bodies_in_flight = Setting(int, 32, "Request bodies the app reads at once; a further request with a body gets 503 before any of it is read.", minimum=1, maximum=10000)
    app_body_memory_bytes = Setting(int, 8388608, "Memory the request bodies being read may take in all (each its share; the rest waits on disk).", minimum=0, maximum=1073741824)
    app_upload_ttl_s = Setting(int, 3600, "Seconds an uploaded file may stay in Gradio's upload folder (the import handler removes it at once after reading it).", minimum=60, maximum=86400)
    app_trusted_proxies = Setting(str, '', "Comma-separated networks (CIDR) of your reverse proxies: from them the app takes the client address for the rate limit from X-Forwarded-For; empty = none (the socket's address counts, forwarded headers are ignored).")


@dataclass(frozen=True)
class SubmissionSettings(Section):
    """Submitted models and review uploads: quotas, the queue, what their endpoints may reach, and how their evaluation is bounded."""

    key: ClassVar[str] = 'submissions'

    submissions_per_week = Setting(int, 3, 'Submissions and review uploads accepted per submitter (the contact, any case) in 7 days; refused tries do not count.', minimum=0)
    submissions_per_address_per_week = Setting(int, 6, 'Submissions and review uploads accepted from one network address (as the app sees it) in 7 days, whatever contact they give; refused tries do not count (submission_refusals_per_address_per_hour limits those).', minimum=0)
    submission_refusals_per_address_per_hour = Setting(int, 20, 'Refused submission or upload tries accepted from one network address per hour (an anti-abuse limit apart from the weekly quota, which counts accepted entries only); over it, tries are refused until the hour has passed, and the refusal says when.', minimum=1, maximum=10000)
    queue_max_pending = Setting(int, 50, 'Submissions and review uploads waiting in the queue at most; further ones are refused until the queue drains.', minimum=1)
    submission_http_allowlist = Setting(str, '', 'Comma-separated hosts that submissions may reach over plain http.')
    submission_private_allowlist = Setting(str, '', 'DANGEROUS: comma-separated networks (CIDR) of loopback/private addresses that submitted endpoints may reach anyway (own services, link-local and metadata addresses stay refused); empty = none.')
    submission_call_timeout_s = Setting(float, 120.0, "Deadline of one call to a submitted model's endpoint (the smaller of this and llm_timeout_s).", minimum=1.0, maximum=600.0)
    submission_max_retries = Setting(int, 1, "Retries of one call to a submitted model (the smaller of this and llm_max_retries).", minimum=0, maximum=5)
    submission_max_consecutive_failures = Setting(int, 4, 'Failed calls in a row after which a submission is stopped and failed (a hanging or broken endpoint).', minimum=1, maximum=100)
    submission_failure_window = Setting(int, 8, "The last this many calls of a submission are what submission_max_failure_rate looks at (an endpoint that fails some prompts and answers others never fails 4 in a row).", minimum=2, maximum=100)
    submission_max_failure_rate = Setting(float, 0.5, 'A submission is stopped and failed once more than this share of submission_failure_window calls failed among its last submission_failure_window calls (checked after each batch of calls).', minimum=0.05, maximum=0.95)
    submission_max_wall_s = Setting(float, 3600.0, "Wall-clock seconds one submission's evaluation may take, counting only its own turns (submission_slice_s); checked between batches of calls, then it is stopped and failed.", minimum=60.0, maximum=86400.0)
    submission_slice_s = Setting(float, 300.0, "Seconds of one submission's turn on the scheduler's worker: running submissions take turns (round robin), each runs batches of calls until its slice is spent, then the next one runs; a turn ends within this plus one batch of calls (at most one call's deadline and retries).", minimum=1.0, maximum=3600.0)
    lm_copy_estimator = Setting(str, "", "Evaluation LM of the LM copy check of submitted models' reviews (an estimator spec: hf:smollm2-135m, or offline): a review that predicts its paper's public reviews, judgment line by line, far beyond what honest reviews of the paper do (the bar calibrated on the store's honest reviews to flag at most 0.5 % of them) is refused, whatever its wording. Costs one LM request per judgment line of each public review of the paper, per checked review, and a calibration of about 160 a paper on up to 300 of the store's papers (SmolLM2 on a 2-core CPU: about 0.4 s a request); every request goes through the log-prob cache, so a second check over the same store computes only new reviews'. Empty: off (the word-level copy check, the information view and the submission-level shift test still run).")
    near_copy_estimator = Setting(str, "offline", "Evaluation LM of the near-paper copy check of submitted models' reviews (issue 62; an estimator spec: offline, hf:smollm2-135m, ...): each review is read against the public reviews of the 5 papers nearest to its paper (the linking code's rare-word index, ranked by the link_estimator's view of the abstracts) whose reviews were public before it was written; one that carries them, judgment line by line, beyond what honest reviews of other papers carry about their nearest papers' reviews (the bar calibrated on the store's honest reviews to flag at most 0.5 % of them) counts as written with public reviews in view: unsealed, never sealed again, named in the change log, counted only once the operator vouches for the model's cutoff and read on the public side of its sealed-gap test (an unlinked earlier version of the paper, copied, cannot count as sealed). Costs one LM request per judgment line of each near paper's public reviews, per review, and a calibration of about 200 honest reviews per check (offline: about 40-70 s of CPU for a 123-review submission on two cores). Empty: off (every review of an unlinked disguised resubmission then counts as sealed unchecked).")
    prose_estimator = Setting(str, "", "Evaluation LM of the prose test of submitted models' reviews (an estimator spec, e.g. hf:smollm2-135m): a review whose log-likelihood per token is below every sampled human review's, less 0.5 nats, is refused. Empty (and for uploaded files): the word-order test of the word model of human reviews.")
    approval_needs_sealed = Setting(bool, True, "Approval of a submitted model's declared cutoff waits until its sealed-gap test can run: at least 8 of its papers scored where it wrote before the reviews were public, and 8 where they were public (its information on the public ones must not exceed that on the sealed ones by more than 1.1x, p < 0.01, whatever the wording of a copy). Off: approval without that evidence, the test then runs after every scoring and holds the model again if it fails. The operator can approve over a hold or missing evidence with `grebench submissions approve ID --override REASON` (public in the audit).")


@dataclass(frozen=True)
class ServiceSettings(Section):
    """The scheduler (`grebench serve`): venues polled, job intervals, snapshots, stopping."""

    key: ClassVar[str] = 'service'

    venues = Setting(str, '', 'Comma-separated OpenReview venue ids (or source specs: `openreview:ID`, `archive:PATH`, `bundled`) polled by the scheduler.')
    poll_interval_min = Setting(float, 60.0, 'Minutes between scheduler polls of the configured venues.', minimum=0.001)
    generate_interval_min = Setting(float, 60.0, 'Minutes between scheduler runs that generate LLM reviews of papers whose reviews are not public yet (sealed).', minimum=0.001)
    score_interval_min = Setting(float, 60.0, 'Minutes between scheduler runs of bench (baseline, controls), scoring, validation and the panel.', minimum=0.001)
    queue_interval_min = Setting(float, 5.0, 'Minutes between scheduler passes over the submission queue.', minimum=0.001)
    site_interval_min = Setting(float, 30.0, "Minutes between rebuilds of the static site and the app's Parquet exports.", minimum=0.001)
    snapshot_check_min = Setting(float, 720.0, 'Minutes between checks whether a yearly snapshot is due (or was requested).', minimum=0.001)
    misfire_grace_s = Setting(float, 21600.0, 'How late (seconds) a scheduled job may still start; jobs wait for each other in one worker thread, so keep it above the longest job.', minimum=0)
    snapshot_date = Setting(str, '01-15', 'Month-day (MM-DD) of the yearly snapshot cut.')
    snapshot_archive_max_mb = Setting(int, 2048, 'Largest snapshot (its files together, MiB) the site and the app offer as one .tar.gz download; a larger one is offered file by file only.', minimum=1, maximum=1048576)
    check_interval_min = Setting(float, 1440.0, "Minutes between the service's checks of the store (every block's checksum, rows against the last board version, the snapshots' hashes: `grebench check`), each followed by a backup copy of the store when it passed; the first runs at start.", minimum=1.0)
    backup_keep = Setting(int, 3, 'Backup copies of the store the service keeps in DATA_DIR/backups (the oldest beyond this are removed); 0: none are made.', minimum=0, maximum=100)
    stop_grace_s = Setting(float, 4.0, 'After SIGTERM/SIGINT: seconds the running job has to reach its next request boundary before the process exits anyway (its run is then marked interrupted): 4 s keeps every stop within 5 s, well inside the 10 s docker stop waits.', minimum=0.5, maximum=3600)


@dataclass(frozen=True)
class SiteSettings(Section):
    """What the static site and the app say at the foot of every page: contact, source, the data's licence."""

    key: ClassVar[str] = 'site'

    site_contact = Setting(str, '', "How to reach whoever runs this leaderboard (an e-mail address or a URL), shown at the foot of every page of the site and the app; empty: the foot says that none is set.")
    site_source_url = Setting(str, '', "URL of the source code the site and the app run (the AGPL asks a network service to offer it), linked at the foot of every page and the app and put in the BibTeX; empty: the foot names the version and its licence only.")
    site_data_licence = Setting(str, 'CC BY 4.0', "Licence of the reviews the site shows, stated at the foot of every page and the app (the bundled ICLR 2026 reviews are CC BY 4.0: grebench/ingest/data/SOURCES.md).")


@dataclass(frozen=True)
class Settings:
    """Resolved settings: the general ones (typed attributes), one section per domain (``settings.scoring``,
    ``settings.app``, ...: each a :class:`Section` of typed attributes), the raw TOML tables (candidates, judges),
    and the data directory's layout.  Part names (estimator, preprocessor, sources, catalogue models) are checked
    against the registries one layer up (``grebench.pipeline.check_setup``)."""

    values: Mapping[str, Any]
    tables: Mapping[str, Any] = field(default_factory=dict)
    config_path: Path | None = None

    data_dir = Setting(str, './grebench-data', 'Directory holding the DuckDB file, caches, exports and the built site.')
    log_format = Setting(str, 'text', 'How log lines are written on stderr: text (each line starts with its time, ISO-8601 UTC: `2026-12-07T08:40:00.123Z INFO grebench.scheduler._service: job poll started`) or json (one JSON object per line: ts, level, logger, message, and a job line\'s job, event, outcome, duration_s).', choices=('text', 'json'))
    log_level = Setting(str, 'INFO', 'Logging level (DEBUG, INFO, WARNING, ERROR).', choices=('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'))
    seed = Setting(int, 20200426, 'Seed for every random choice (human-baseline pick, controls, bootstrap, sampling).', minimum=0)
    models_dir = Setting(str, '', 'Directory of the built-in evaluation LMs that `grebench models pull` (or first use of hf:NAME) materialises (default: DATA_DIR/models).')
    site_dir = Setting(str, '', 'Output directory of the static site (default: DATA_DIR/site).')

    # -- the sections ---------------------------------------------------------------------------------------------
    @cached_property
    def run(self) -> RunSettings:
        """The ``[run]`` settings: what the main job works on."""
        return RunSettings(self.values)

    @cached_property
    def ingest(self) -> IngestSettings:
        """The ``[ingest]`` settings: fetching papers and reviews (OpenReview, archives) and extracting PDFs."""
        return IngestSettings(self.values)

    @cached_property
    def limits(self) -> LimitSettings:
        """The ``[limits]`` settings: what outside input and outside calls may cost: sizes ingest accepts, the PDF extractor's sandbox, every LLM call's deadline, retries and answer size, and a snapshot import's size."""
        return LimitSettings(self.values)

    @cached_property
    def bench(self) -> BenchSettings:
        """The ``[bench]`` settings: candidate reviews: the candidates' calls, the local candidates and the controls."""
        return BenchSettings(self.values)

    @cached_property
    def scoring(self) -> ScoringSettings:
        """The ``[scoring]`` settings: the evaluation LM (estimators and their engines), preprocessing and the boards' statistics."""
        return ScoringSettings(self.values)

    @cached_property
    def panel(self) -> PanelSettings:
        """The ``[panel]`` settings: the judge panel: its exam, pairs and debate."""
        return PanelSettings(self.values)

    @cached_property
    def app(self) -> AppSettings:
        """The ``[app]`` settings: the Gradio app: address, sessions, uploads, request and connection limits."""
        return AppSettings(self.values)

    @cached_property
    def submissions(self) -> SubmissionSettings:
        """The ``[submissions]`` settings: submitted models and review uploads: quotas, the queue, what their endpoints may reach, and how their evaluation is bounded."""
        return SubmissionSettings(self.values)

    @cached_property
    def site(self) -> SiteSettings:
        """The ``[site]`` settings: what the static site and the app say at the foot of every page: contact, source, the data's licence."""
        return SiteSettings(self.values)

    @cached_property
    def service(self) -> ServiceSettings:
        """The ``[service]`` settings: the scheduler (`grebench serve`): venues polled, job intervals, snapshots, stopping."""
        return ServiceSettings(self.values)

    # -- the data directory's layout -----------------------------------------------------------------------------------
    @property
    def data_path(self) -> Path:
        """The data directory as a path."""
        return Path(self.data_dir).expanduser()

    @property
    def db_path(self) -> Path:
        """Path of the writer's DuckDB file."""
        return self.data_path / "grebench.duckdb"

    @property
    def site_path(self) -> Path:
        """Output directory of the static site (setting ``site_dir``, by default DATA_DIR/site)."""
        return Path(self.site_dir).expanduser() if self.site_dir else self.data_path / "site"

    @property
    def export_path(self) -> Path:
        """The Parquet exports the app reads (DATA_DIR/export)."""
        return self.data_path / "export"

    @property
    def backups_path(self) -> Path:
        """The copies of the store that ``grebench serve`` keeps (DATA_DIR/backups): restore one when the store is
        damaged."""
        return self.data_path / "backups"

    @property
    def service_status_path(self) -> Path:
        """What ``grebench serve`` last wrote of its jobs (DATA_DIR/service-status.json): ``grebench status`` reads
        it while the service holds the store."""
        return self.data_path / "service-status.json"

    @property
    def snapshots_path(self) -> Path:
        """Where snapshots are cut (DATA_DIR/snapshots)."""
        return self.data_path / "snapshots"

    @property
    def snapshot_archives_path(self) -> Path:
        """Where each snapshot's one-file download is built once (DATA_DIR/snapshot-archives), then linked into the
        site and the app."""
        return self.data_path / "snapshot-archives"

    @property
    def snapshot_requests_path(self) -> Path:
        """Where ``grebench snapshot export`` leaves a request while ``grebench serve`` holds the store."""
        return self.data_path / "snapshot-requests.json"

    @property
    def models_path(self) -> Path:
        """Where built-in models are materialised (setting ``models_dir``, by default DATA_DIR/models)."""
        return Path(self.models_dir).expanduser() if self.models_dir else self.data_path / "models"

    @property
    def reuse_probes_path(self) -> Path:
        """The hf estimator's measured reuse choices, per machine, device and model (MODELS/.reuse-probes)."""
        return self.models_path / ".reuse-probes"

    @property
    def local_servers_path(self) -> Path:
        """Logs of the local model servers (DATA_DIR/local-servers)."""
        return self.data_path / "local-servers"

    @property
    def queue_path(self) -> Path:
        """The submission queue, a DuckDB file apart from the store (the app writes it, never the store)."""
        return self.data_path / "queue.duckdb"

    # -- helpers ---------------------------------------------------------------------------------------------------
    def value(self, name: str) -> Any:
        """The value of the setting ``name``, whatever its section: what a fingerprint of declared setting names
        reads.  An undeclared name is a :class:`KeyError`, never a default."""
        if name not in _BY_NAME:
            raise KeyError(f"unknown setting {name!r}")
        return self.values[name]

    def inputs(self, declared: StageInputs, job: Mapping[str, object] | None = None) -> dict[str, object]:
        """The values of a stage's declared inputs, for its fingerprint (the one way a stage puts settings in it):
        each setting's, the job's for ``declared.job`` (``job`` must give every one of them, and nothing else), and
        each of ``declared.tables`` as ``[[name]]``."""
        given = dict(job or {})
        if set(given) != set(declared.job):
            raise KeyError(f"the job's values of {list(declared.job)} are needed, got {sorted(given)}")
        out: dict[str, object] = {name: given[name] if name in declared.job else self.value(name)
                                  for name in declared.inputs}
        out.update({f"[[{name}]]": self.tables.get(name) for name in declared.tables})
        return out

    def listed(self, name: str) -> list[str]:
        """A comma-separated setting as its non-empty, stripped items (e.g. ``local_candidates``)."""
        return [item.strip() for item in str(self.value(name) or "").split(",") if item.strip()]

    def replace(self, **changes: Any) -> Settings:
        """A copy with some declared values changed (CLI options use this)."""
        values = dict(self.values)
        for key, value in changes.items():
            if key not in _BY_NAME:
                raise KeyError(f"unknown setting {key!r}")
            values[key] = _coerce(_BY_NAME[key], value, "override")
        return Settings(values=values, tables=self.tables, config_path=self.config_path)


#: The sections, in the order the documentation gives them.
SECTIONS: tuple[type[Section], ...] = (RunSettings, IngestSettings, BenchSettings, ScoringSettings, PanelSettings,
                                       AppSettings, SiteSettings, SubmissionSettings, ServiceSettings, LimitSettings)
#: The general settings (on :class:`Settings` itself, at the top of a settings file).
GENERAL: tuple[Setting[Any], ...] = tuple(v for v in vars(Settings).values() if isinstance(v, Setting))
#: Every setting, the general ones first, then each section's in order.
SETTINGS: tuple[Setting[Any], ...] = GENERAL + tuple(s for section in SECTIONS for s in section.declared())
_BY_NAME = {s.name: s for s in SETTINGS}
_SECTION_KEYS = {section.key: section for section in SECTIONS}
if len(_BY_NAME) != len(SETTINGS):
    raise RuntimeError("a setting's name is declared in two sections")


def declaration(name: str) -> Setting[Any]:
    """The declaration of the setting ``name``, whatever its section; a :class:`KeyError` for an unknown name."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown setting {name!r}") from None


@dataclass(frozen=True)
class StageInputs:
    """The settings one stage reads, declared once beside the stage's fingerprint (issue 61), so that no stage keeps
    a hand list at its fingerprint's call.

    ``inputs`` are the settings its results depend on: each one's value is in its fingerprint (:meth:`values`), so
    changing one makes the stage run again (:meth:`Settings.inputs`).  ``job`` are those of ``inputs`` the stage takes from the job's resolved
    run rather than from the settings (an option or a stored setup may differ from the setting): their value in the
    fingerprint is the one the job passes, and the stage does not read them itself.  ``tables`` are the
    ``[[tables]]`` it reads (in the fingerprint as ``[[name]]``).  :meth:`Settings.inputs` gives the values a
    fingerprint holds.  ``operational`` are the settings it reads that do
    not change its results (where files live, deadlines, retries, concurrency, ports): in no fingerprint.  The
    tests of each stage record every setting it reads (``tests/fakes/settings_reads.py``) and fail on one that is
    neither an input nor operational.  Every name must be a declared setting (checked when the declaration is
    made), and no setting may be both."""

    inputs: tuple[str, ...]
    operational: tuple[str, ...] = ()
    job: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [n for n in (*self.inputs, *self.operational) if n not in _BY_NAME]
        unknown += [f"[[{t}]]" for t in self.tables if t not in TABLES]
        if unknown:
            raise KeyError(f"unknown setting(s) declared: {', '.join(unknown)}")
        if set(self.inputs) & set(self.operational):
            raise ValueError(f"declared both input and operational: {sorted(set(self.inputs) & set(self.operational))}")
        if not set(self.job) <= set(self.inputs):
            raise ValueError(f"job inputs that are not inputs: {sorted(set(self.job) - set(self.inputs))}")

    @property
    def names(self) -> frozenset[str]:
        """Every setting declared (inputs and operational): what the stage may read."""
        return frozenset(self.inputs) | frozenset(self.operational)


#: The array tables a settings file may hold besides the settings: ``[[candidates]]`` (docs/candidates.md) and
#: ``[[judges]]`` (docs/panel.md).
TABLES = ("candidates", "judges")


def _did_you_mean(word: str, known: Iterable[str], form: str = "{}") -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f"; did you mean {form.format(close[0])}?" if close else ""


def _where(setting: Setting[Any]) -> str:
    """Where a setting goes in a settings file, in words: its section's table, or the top of the file."""
    return f"[{setting.section}]" if setting.section else "the top of the file"


def _unknown_table(path: Path, key: str, value: Any) -> str:
    """Why ``[key]`` is refused, in one line: settings under a table that is not their section would be ignored."""
    header = f"[[{key}]]" if isinstance(value, list) else f"[{key}]"
    known = ("the tables grebench reads are the sections " + ", ".join(f"[{s.key}]" for s in SECTIONS) + " and "
             + " and ".join(f"[[{name}]]" for name in TABLES))
    forms = [*(f"[{s.key}]" for s in SECTIONS), *(f"[[{t}]]" for t in TABLES)]
    settings = [k for k in value if k in _BY_NAME] if isinstance(value, dict) else []
    if settings:
        where = ", ".join(f"{k} under {_where(_BY_NAME[k])}" for k in settings[:3])
        return (f"{path}: unknown table {header}{_did_you_mean(header, forms)} (each setting goes under its "
                f"section's table or at the top of the file: {where}{' ...' if len(settings) > 3 else ''}); {known}")
    return f"{path}: unknown table {header}{_did_you_mean(header, forms)} ({known})"


def _file_value(path: Path, setting: Setting[Any], value: Any, seen: dict[str, str], where: str) -> Any:
    """One setting's value from the settings file, refused when it is a table or was already set elsewhere."""
    if isinstance(value, (dict, list)):  # str() would turn a table into a value
        raise ValueError(f"{path}: {setting.name} is a setting, not a table: write {setting.name} = VALUE under "
                         f"{_where(setting)}")
    if setting.name in seen:
        raise ValueError(f"{path}: {setting.name} is set twice ({seen[setting.name]} and {where}); keep one")
    seen[setting.name] = where
    return _coerce(setting, value, str(path))


#: ``GREBENCH_*`` variables that are not settings: read by grebench itself (the settings file, the submission keys'
#: secret, a folder of model wheels, a Ray cluster) or by its tests.
ENV_NOT_SETTINGS = ("CONFIG", "SECRET_KEY", "MODEL_WHEELS", "RAY_ADDRESS")
ENV_NOT_SETTINGS_PREFIXES = ("SUBMISSION_KEY_", "OPENREVIEW_BASEURL_", "TEST_", "RELIABILITY_")


def unknown_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """One line for each ``GREBENCH_*`` variable of ``env`` that names no setting, with the closest setting's
    variable (``GREBENCH_ESTIMTOR``: did you mean ``GREBENCH_ESTIMATOR``?).  A warning, not a refusal as an unknown
    key of the settings file is: the environment is shared with other programs and scripts (and grebench reads a
    few variables of its own that are no settings: :data:`ENV_NOT_SETTINGS`); a misspelt one was silently ignored,
    and the run went on with the default (issue 64)."""
    env = os.environ if env is None else env
    known = [f"{ENV_PREFIX}{s.name.upper()}" for s in SETTINGS]
    lines = []
    for name in sorted(env):
        rest = name[len(ENV_PREFIX):] if name.startswith(ENV_PREFIX) else None
        if rest is None or name in known or rest in ENV_NOT_SETTINGS or rest.startswith(ENV_NOT_SETTINGS_PREFIXES):
            continue
        lines.append(f"{name} names no setting and is ignored{_did_you_mean(name, known)}")
    return lines


def load_settings(config: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Resolve settings from defaults, the TOML file and ``GREBENCH_*`` variables.

    In the file a setting goes under its section's table (``[scoring]``, ``estimator = ...``) or, as in files
    written before sections existed, at the top; a setting under another section's table, or set in both places,
    is refused in one line naming where it goes."""
    env = os.environ if env is None else env
    path_text = str(config) if config else env.get(f"{ENV_PREFIX}CONFIG")
    path = Path(path_text) if path_text else None
    values = {s.name: s.default for s in SETTINGS}
    tables: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: invalid TOML: {exc}") from None
        seen: dict[str, str] = {}
        for key, value in raw.items():
            if key in TABLES:
                tables[key] = value
            elif key in _BY_NAME:
                values[key] = _file_value(path, _BY_NAME[key], value, seen, "the top of the file")
            elif key in _SECTION_KEYS and isinstance(value, dict):
                for name, item in value.items():
                    setting = _BY_NAME.get(name)
                    if setting is None or setting.section != key:
                        known = [s.name for s in _SECTION_KEYS[key].declared()]
                        moved = f"; {name} goes under {_where(setting)}" if setting is not None else \
                            _did_you_mean(name, known, "{!r}")
                        raise ValueError(f"{path}: [{key}] has no setting {name!r}{moved}")
                    values[name] = _file_value(path, setting, item, seen, f"[{key}]")
            elif isinstance(value, (dict, list)):
                raise ValueError(_unknown_table(path, key, value))
            else:
                raise ValueError(f"{path}: unknown setting {key!r}{_did_you_mean(key, _BY_NAME, '{!r}')}")
    for setting in SETTINGS:
        env_name = f"{ENV_PREFIX}{setting.name.upper()}"
        if env_name in env:
            values[setting.name] = _coerce(setting, env[env_name], env_name)
    return Settings(values=values, tables=tables, config_path=path)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _allowed(setting: Setting[Any]) -> str:
    """What a setting allows, in a table cell: its choices, or its bounds (``≥ 1``, ``0 – 100``)."""
    if setting.choices:
        return ", ".join(setting.choices)
    low, high = setting.minimum, setting.maximum
    if low is not None and high is not None:
        return f"{_num(low)} – {_num(high)}"
    return f"≥ {_num(low)}" if low is not None else f"≤ {_num(high)}" if high is not None else ""


def reference_markdown() -> str:
    """The settings reference of ``docs/configuration.md``: one table per section, made from the declarations (a
    test keeps the page equal to it; ``python -m grebench.settings`` prints it)."""
    parts: list[str] = []
    groups: list[tuple[str, str, tuple[Setting[Any], ...]]] = [
        ("General", "At the top of the settings file, under no table header.", GENERAL)]
    groups += [(f"[{s.key}]", (s.__doc__ or "").strip(), s.declared()) for s in SECTIONS]
    for title, doc, declared in groups:
        parts.append(f"### {title}\n\n{doc}\n\n| setting | type | default | meaning | allowed |\n|---|---|---|---|---|")
        parts += [f"| `{s.name}` | {s.type.__name__} | `{s.default!r}` | {_cell(s.help)} | {_cell(_allowed(s))} |"
                  for s in declared]
        parts.append("")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
