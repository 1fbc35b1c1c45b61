"""Builders for estimator tests and benchmarks: bundled reviews as judgment lines, and a tiny Llama built locally.

Nothing is downloaded: the BPE tokenizer is trained here on bundled review text, the model has random weights
from a fixed seed.  Used by the estimator tests, the fake vLLM/SGLang servers and ``benchmarks/scoring_engine.py``
(which runs with the product's own install: this module imports nothing of the test tooling, so the benchmark can
import it from a checkout without pytest).  torch, tokenizers and transformers are imported inside the functions.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

BUNDLED = Path(str(resources.files("grebench.ingest") / "data" / "iclr2020_reviews.jsonl"))

# Llama-3-style chat template with a date-injection variable, as Llama-3.1 templates have.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% if date_string is not defined %}{% set date_string = '26 Jul 2024' %}{% endif %}"
    "<|start_header_id|>system<|end_header_id|>\n\nToday Date: {{ date_string }}\n\n"
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}<|eot_id|>{% endif %}{% endfor %}"
    "{% for m in messages %}{% if m['role'] != 'system' %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

_SENT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_NEG = ("however", "not ", "unclear", "lack", "weak", "limited", "concern", "missing", "fail", "only ", "unfortunately")
_SUG = ("should", "suggest", "would be", "could ", "recommend", "encourage")


@lru_cache(maxsize=1)
def bundled_papers() -> list[dict]:
    """The bundled ICLR 2020 papers (id, abstract, review texts)."""
    out = []
    for line in BUNDLED.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        row = json.loads(line)
        reviews = [r["content"].get("review", "") for r in row.get("reviews", [])]
        out.append({"id": row["id"], "abstract": row.get("abstract", ""), "reviews": [r for r in reviews if r.strip()]})
    return out


def rules_lines(text: str, max_lines: int = 40) -> str:
    """A crude stand-in for the rules preprocessor: one sentence per line with a judgment verb chosen by keywords."""
    lines = []
    for sent in _SENT_RE.split(text):
        sent = " ".join(sent.split()).strip(" -*#")
        if len(sent.split()) < 4:
            continue
        low = sent.lower()
        verb = ("questions" if sent.endswith("?") else "criticizes" if any(k in low for k in _NEG)
                else "suggests" if any(k in low for k in _SUG) else "appreciates")
        lines.append(f"The reviewer {verb} that {' '.join(sent.split()[:40])}")
        if len(lines) >= max_lines:
            break
    return "\n".join(lines)


@lru_cache(maxsize=1)
def judgment_corpus() -> dict[str, list[str]]:
    """paper_id -> judgment-line texts of its human reviews (the offline estimator's corpus)."""
    return {p["id"]: [rules_lines(r) for r in p["reviews"]] for p in bundled_papers()}


def build_tiny_llama(path: Path, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                     vocab: int = 400, intermediate: int | None = None, seed: int = 0,
                     model_vocab: int = 0) -> Path:
    """Train a byte-level BPE on bundled reviews, build a random Llama of the given shape, save both to ``path``.

    ``model_vocab`` (when larger than the BPE) widens the LM head as a real vocabulary would.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    texts = [p["abstract"] for p in bundled_papers()[:40]] + [r for p in bundled_papers()[:40] for r in p["reviews"]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|end_of_text|>")
    fast.chat_template = CHAT_TEMPLATE
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=max(len(fast), model_vocab), hidden_size=hidden,
                      intermediate_size=intermediate or hidden * 2,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=8192, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                      pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(path)
    return path


def sample_requests(n_papers: int = 3, n_candidates: int = 3, with_synopsis: bool = True) -> list:
    """Marginal and conditional requests for a few bundled papers (2 references each), shortened for speed."""
    from grebench.scoring._request import LogprobRequest

    corpus = judgment_corpus()
    papers = [p for p in bundled_papers() if len(corpus[p["id"]]) >= 3][:n_papers + n_candidates]
    reqs = []
    for k, p in enumerate(papers[:n_papers]):
        revs = ["\n".join(t.split("\n")[:4]) for t in corpus[p["id"]]]
        syn = " ".join(p["abstract"].split()[:60]) if with_synopsis else None
        cands = [revs[2], "\n".join(corpus[papers[n_papers + (k % n_candidates)]["id"]][0].split("\n")[:3])]
        cands = cands[:n_candidates]
        for ref in revs[:2]:
            reqs.append(LogprobRequest(p["id"], syn, None, ref))
            reqs += [LogprobRequest(p["id"], syn, c, ref) for c in cands]
    return reqs
