"""The embedded evaluation-LM: a leave-paper-out Witten-Bell bigram background mixed with a copy component.

Tokens are lower-cased words and punctuation; every judgment line ends with an end-of-line token and a text ends
with an end-of-text token.  For the paper being scored the model is exactly the one fitted on the corpus *without*
that paper: global counts are built once and the paper's own counts subtracted (``_PaperModel``).

Token space for one request: V_p (words used in the reviews of at least ``min_papers`` other papers) ∪ {EOL, EOS}
∪ C_oov (conditioning words outside V_p) ∪ {UNK}.  The background gives its OOV mass P_bg(UNK) partly to each
C_oov word (share ``eps`` each) and the rest to UNK, so a copied rare word is never *less* likely than an unseen one
and every distribution sums to 1 (``next_token_distribution`` exposes it for the test).  Each conditioning source
(synopsis, first review) has its own weight ``lam``; within a source a bigram cache gets ``beta`` of it when the
previous token occurs there as a context, else the unigram cache takes it all; the background keeps 1 - Σ lam.
A separate background weight matters: a Dirichlet-style cache without one rewarded a generic review.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grebench.scoring._request import LogprobRequest, LogprobResult

EOL, EOS = "<eol>", "<eos>"
UNK = "<unk>"
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[^\sa-z0-9]")

# Fixed defaults chosen with ``fit_weights`` on the bundled ICLR 2020 sample; see docs/estimators.md.
DEFAULT_LAM = 0.08
DEFAULT_BETA = 0.70
DEFAULT_EPS = 1e-3
DEFAULT_MIN_PAPERS = 2


def tokenize(text: str | None) -> list[str]:
    """Word/punctuation tokens of ``text``, each non-empty line followed by EOL (no EOS)."""
    out: list[str] = []
    for line in (text or "").split("\n"):
        toks = _TOKEN_RE.findall(line.lower())
        if toks:
            out.extend(toks)
            out.append(EOL)
    return out


def target_tokens(text: str) -> list[str]:
    """Tokens scored for a target: its lines with EOL, then EOS."""
    return [*tokenize(text), EOS]


class _Corpus:
    """Global raw counts (unigram, bigram, context, continuation types, paper frequency) and per-paper counts."""

    def __init__(self, corpus: Mapping[str, Sequence[str]]) -> None:
        self.ids: dict[str, int] = {EOL: 0, EOS: 1}
        per_paper_uni: dict[str, Counter[int]] = {}
        per_paper_bi: dict[str, Counter[tuple[int, int]]] = {}
        for pid in sorted(corpus):
            uni: Counter[int] = Counter()
            bi: Counter[tuple[int, int]] = Counter()
            for text in corpus[pid]:
                toks = [self.ids.setdefault(t, len(self.ids)) for t in target_tokens(text)]
                if len(toks) <= 1:
                    continue
                uni.update(toks)
                bi.update(zip([0, *toks[:-1]], toks, strict=True))  # the first token follows a line start (EOL)
            per_paper_uni[pid], per_paper_bi[pid] = uni, bi
        n = len(self.ids)
        self.n_raw = n
        self.uni = np.zeros(n, np.int64)
        self.df = np.zeros(n, np.int64)
        glob: Counter[tuple[int, int]] = Counter()
        for pid in per_paper_uni:
            ids = np.fromiter(per_paper_uni[pid].keys(), np.int64)
            self.uni[ids] += np.fromiter(per_paper_uni[pid].values(), np.int64)
            self.df[ids] += 1
            glob.update(per_paper_bi[pid])
        keys = np.array([u * n + v for u, v in glob], np.int64)
        order = np.argsort(keys)
        self.bi_keys = keys[order]
        self.bi_cnt = np.fromiter(glob.values(), np.int64, len(glob))[order]
        self.paper_uni = {p: (np.fromiter(c.keys(), np.int64), np.fromiter(c.values(), np.int64))
                          for p, c in per_paper_uni.items()}
        self.paper_bi = {}
        for p, c in per_paper_bi.items():
            k = np.array([u * n + v for u, v in c], np.int64).reshape(-1)
            self.paper_bi[p] = (k, np.fromiter(c.values(), np.int64, len(c)))


@dataclass
class _PaperModel:
    """Background counts of the corpus without one paper (dense per raw word id)."""

    in_vocab: np.ndarray   # bool per raw id: in V_p (EOL/EOS always)
    p_uni: np.ndarray      # unigram probability per raw id (0 outside V_p)
    p_unk: float           # unigram probability of UNK
    ctx: np.ndarray        # count of each raw id as a left context
    types: np.ndarray      # distinct continuation types per context
    unk_cont: np.ndarray   # count of context u followed by an OOV word
    bi_cnt: np.ndarray     # bigram counts aligned with _Corpus.bi_keys, paper removed
    vocab_size: int        # |V_p| + 3 (EOL, EOS, UNK included)


def _paper_model(c: _Corpus, paper_id: str, min_papers: int) -> _PaperModel:
    n = c.n_raw
    uni, df = c.uni.copy(), c.df.copy()
    bi = c.bi_cnt.copy()
    if paper_id in c.paper_uni:
        ids, cnt = c.paper_uni[paper_id]
        uni[ids] -= cnt
        df[ids] -= 1
        keys, bcnt = c.paper_bi[paper_id]
        bi[np.searchsorted(c.bi_keys, keys)] -= bcnt
    in_vocab = df >= min_papers
    in_vocab[[0, 1]] = True
    v_size = int(in_vocab.sum()) + 1
    n_tok = int(uni.sum())
    unk_count = n_tok - int(uni[in_vocab].sum())
    denom = n_tok + v_size  # add-one over V_p ∪ {EOL, EOS, UNK}
    p_uni = np.where(in_vocab, (uni + 1) / denom, 0.0)
    u_of, v_of = c.bi_keys // n, c.bi_keys % n
    ctx = np.bincount(u_of, weights=bi, minlength=n)
    types = np.bincount(u_of, weights=(bi > 0), minlength=n)
    unk_cont = ctx - np.bincount(u_of, weights=bi * in_vocab[v_of], minlength=n)
    return _PaperModel(in_vocab, p_uni, (unk_count + 1) / denom, ctx, types, unk_cont, bi, v_size)


class OfflineEstimator:
    """Normalised n-gram + copy LM over words, fitted leave-paper-out on the corpus of human judgment lines."""

    def __init__(self, corpus: Mapping[str, Sequence[str]], lam: float = DEFAULT_LAM, beta: float = DEFAULT_BETA,
                 eps: float = DEFAULT_EPS, min_papers: int = DEFAULT_MIN_PAPERS) -> None:
        if not 0.0 <= lam < 0.5 or not 0.0 <= beta <= 1.0:
            raise ValueError("need 0 <= lam < 0.5 (two sources share the copy mass) and 0 <= beta <= 1")
        self.lam, self.beta, self.eps, self.min_papers = lam, beta, eps, min_papers
        self._c = _Corpus(corpus)
        self._cache: OrderedDict[str, _PaperModel] = OrderedDict()
        self.id = f"offline:wb-bigram+copy:lam={lam:g}:beta={beta:g}:eps={eps:g}:minpapers={min_papers}:lower-words"

    def _model(self, paper_id: str) -> _PaperModel:
        m = self._cache.get(paper_id)
        if m is None:
            m = self._cache[paper_id] = _paper_model(self._c, paper_id, self.min_papers)
            if len(self._cache) > 4:
                self._cache.popitem(last=False)
        return m

    def _raw(self, tok: str) -> int:
        return self._c.ids.get(tok, -1)

    def _background(self, m: _PaperModel, prevs: Sequence[str], toks: Sequence[str]) -> np.ndarray:
        """P_bg(tok | prev) per position; tokens outside V_p get the whole P_bg(UNK | prev)."""
        ids = np.array([self._c.ids.get(t, -1) for t in toks], np.int64)
        pid = np.array([self._c.ids.get(t, -1) for t in prevs], np.int64)
        known, pknown = ids >= 0, pid >= 0
        ids0, pid0 = np.where(known, ids, 0), np.where(pknown, pid, 0)
        inv = known & m.in_vocab[ids0]
        p_uni = np.where(inv, m.p_uni[ids0], m.p_unk)
        pinv = pknown & m.in_vocab[pid0]
        ctx, types = m.ctx[pid0], m.types[pid0]
        n, bk = self._c.n_raw, self._c.bi_keys
        keys = pid0 * n + ids0
        pos = np.minimum(np.searchsorted(bk, keys), len(bk) - 1)
        cnt = np.where(known & pknown & (bk[pos] == keys), m.bi_cnt[pos], 0).astype(float)
        cnt = np.where(inv, cnt, m.unk_cont[pid0])
        has_ctx = pinv & (ctx + types > 0)
        wb = (cnt + types * p_uni) / np.where(has_ctx, ctx + types, 1.0)
        return np.where(has_ctx, wb, p_uni)

    def _oov_of(self, m: _PaperModel, tok: str) -> bool:
        i = self._c.ids.get(tok, -1)
        return i < 0 or not m.in_vocab[i]

    def _components(self, m: _PaperModel, prevs: Sequence[str], toks: Sequence[str],
                    req: LogprobRequest) -> tuple[np.ndarray, ...]:
        sources = [s for s in (tokenize(x) for x in (req.synopsis, req.first_review) if x) if s]
        c_oov = {t for s in sources for t in s if self._oov_of(m, t)}
        eps = min(self.eps, 0.5 / len(c_oov)) if c_oov else 0.0
        bg = self._background(m, prevs, toks)
        oov = np.array([self._oov_of(m, t) for t in toks], bool)
        in_c = np.array([t in c_oov for t in toks], bool)
        bg = np.where(oov, np.where(in_c, bg * eps, bg * (1.0 - eps * len(c_oov))), bg)
        out = [bg]
        for s in sources:
            uni, ctxs, bis = Counter(s), Counter(s[:-1]), Counter(itertools.pairwise(s))
            out.append(np.array([uni[t] / len(s) for t in toks]))
            out.append(np.array([bis[(p, t)] / ctxs[p] if ctxs[p] else 0.0 for p, t in zip(prevs, toks, strict=True)]))
            out.append(np.array([ctxs[p] > 0 for p in prevs], float))
        return tuple(out)

    def components(self, req: LogprobRequest) -> tuple[np.ndarray, ...]:
        """Per target token: background, then per source (unigram cache, bigram cache, bigram-defined flag)."""
        toks = target_tokens(req.target)
        return self._components(self._model(req.paper_id), [EOL, *toks[:-1]], toks, req)

    def mix(self, comps: Sequence[np.ndarray], lam: float | None = None, beta: float | None = None) -> np.ndarray:
        """Per-token probability of the mixture for given weights (used by scoring and by the weight fit)."""
        lam = self.lam if lam is None else lam
        beta = self.beta if beta is None else beta
        n_src = (len(comps) - 1) // 3
        p = (1.0 - lam * n_src) * comps[0]
        for k in range(n_src):
            uni, bi, has = comps[1 + 3 * k: 4 + 3 * k]
            p = p + lam * ((1.0 - beta * has) * uni + beta * has * bi)
        return p

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed natural-log probabilities of each target (EOL and EOS tokens included)."""
        out = []
        for req in requests:
            p = self.mix(self.components(req))
            out.append(LogprobResult(float(np.log(p).sum()), len(p)))
        return out

    def next_token_distribution(self, context_tokens: Sequence[str], conditioning: LogprobRequest) -> dict[str, float]:
        """The full next-token distribution after ``context_tokens`` over the request's token space (sums to 1)."""
        m = self._model(conditioning.paper_id)
        sources = [tokenize(x) for x in (conditioning.synopsis, conditioning.first_review) if x]
        c_oov = sorted({t for s in sources for t in s if self._oov_of(m, t)})
        space = [t for t, i in self._c.ids.items() if m.in_vocab[i]] + [*c_oov, UNK]
        prev = context_tokens[-1] if context_tokens else EOL
        p = self.mix(self._components(m, [prev] * len(space), space, conditioning))
        return dict(zip(space, p.tolist(), strict=True))


def held_out_pairs(corpus: Mapping[str, Sequence[str]], max_pairs: int = 300) -> list[LogprobRequest]:
    """Deterministic (target, first review) pairs of two human reviews of the same paper."""
    pairs = []
    for pid in sorted(corpus):
        texts = [t for t in corpus[pid] if t.strip()]
        if len(texts) >= 2:
            pairs.append(LogprobRequest(pid, None, texts[1], texts[0]))
    step = max(1, len(pairs) // max_pairs)
    return pairs[::step][:max_pairs]


def fit_weights(est: OfflineEstimator, requests: Sequence[LogprobRequest]) -> tuple[float, float, float]:
    """Maximum-likelihood (lam, beta) on held-out pairs by grid search; returns them and the mean log-lik per token."""
    comps = [est.components(r) for r in requests]
    joined = [np.concatenate(parts) for parts in zip(*comps, strict=True)] if comps else []
    best = (-math.inf, 0.0, 0.0)
    for lam in np.arange(0.02, 0.50, 0.02):
        for beta in np.arange(0.0, 1.0001, 0.1):
            ll = float(np.log(est.mix(joined, float(lam), float(beta))).mean())
            best = max(best, (ll, round(float(lam), 2), round(float(beta), 2)))
    return best[1], best[2], best[0]
