"""The embedded evaluation-LM: a leave-paper-out Witten-Bell bigram background with a content-word copy component.

Tokens are lower-cased words and punctuation; every judgment line ends with an end-of-line token and a text ends
with an end-of-text token.  For the paper being scored the model is exactly the one fitted on the corpus *without*
that paper: global counts are built once and the paper's own counts subtracted (``_paper_model``).

Token space for one request: V_p (words used in the reviews of at least ``min_papers`` other papers) ∪ {EOL, EOS}
∪ C_oov (conditioning words outside V_p) ∪ {UNK}.  Every OOV word is one specific word with share ``eps`` of the
background's OOV mass P_bg(UNK) — in the marginal and the conditional alike, so the PMI of a shared rare word is
only its copy gain — and UNK (any other OOV word) keeps the rest.

The space splits into *function* tokens (stopwords, the judgment-phrase words, punctuation, EOL, EOS, when in V_p)
and *content* tokens (everything else, OOV included).  The background alone predicts function tokens; within the
content class, whose total mass M_c(prev) the background also sets, the background keeps 1 - Σ lam and each
conditioning source (synopsis; first review) with at least one content token adds lam × its copy distribution over
its content tokens (counts, or types with ``dedup``; a bigram cache gets ``beta`` of it when the previous token
occurs there before a content word).  So a review earns probability only for the content words it shares with the
reference: adding phrase or function words changes nothing, and every distribution still sums to 1
(``next_token_distribution``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import ESTIMATORS, EstimatorContext

EOL, EOS = "<eol>", "<eos>"
UNK = "<unk>"
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[^\sa-z0-9]")

# Fixed defaults chosen with ``fit_weights`` on the bundled ICLR 2020 sample (rules-v2 lines); see docs/estimators.md.
DEFAULT_LAM = 0.08
DEFAULT_BETA = 0.4
DEFAULT_EPS = 1e-3
DEFAULT_MIN_PAPERS = 2
DEFAULT_DEDUP = False  # token counts: better held-out likelihood and larger validation effects than types
# The four judgment phrases' words and English function words: predicted by the background, never copied.
PHRASE_WORDS = frozenset(["the", "reviewer", "appreciates", "criticizes", "questions", "suggests", "that"])
_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren't as at be because been before being below between
both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each either else etc
even ever few for from further had hadn't has hasn't have haven't having he her here hers herself him himself his how
however i i'd i'll i'm i've if in into is isn't it it's its itself just let's may me might more most much must mustn't
my myself neither no nor not of off on once only or other otherwise our ours ourselves out over own per quite rather
same shall she should shouldn't so some such than that that's the their theirs them themselves then there there's
these they they'd they're they've this those though through thus to too under until up upon us very via was wasn't we
we'd we're we've were weren't what what's when where whether which while who whom whose why will with within without
won't would wouldn't yet you you'd you're you've your yours yourself e g
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_K = 1 << 31  # key of a source bigram: prev * _K + tok
_EMPTY = np.zeros(0, np.int64)
_FUNCTION_WORDS = STOPWORDS | PHRASE_WORDS | {EOL, EOS}
_STOP_DIGEST = hashlib.sha256(" ".join(sorted(_FUNCTION_WORDS)).encode()).hexdigest()[:8]


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


def is_function_token(tok: str) -> bool:
    """Stopword, judgment-phrase word, punctuation, EOL or EOS: the background predicts it, nothing copies it."""
    return tok in _FUNCTION_WORDS or not (tok[0].isalnum() or tok == UNK)


def corpus_digest(corpus: Mapping[str, Sequence[str]]) -> str:
    """First 12 hex digits of sha256 over the sorted (paper id, text) entries: the fit depends on every one."""
    h = hashlib.sha256()
    for entry in sorted(f"{pid}\t{text}" for pid, texts in corpus.items() for text in texts):
        h.update(entry.encode("utf-8") + b"\x00")
    return h.hexdigest()[:12]


class _Corpus:
    """Global raw counts (unigram, bigram, paper frequency) and per-paper counts, over interned token ids."""

    def __init__(self, corpus: Mapping[str, Sequence[str]]) -> None:
        self.ids: dict[str, int] = {EOL: 0, EOS: 1}
        seqs: dict[str, list[np.ndarray]] = {}
        for pid in sorted(corpus):
            seqs[pid] = [np.array([self.ids.setdefault(t, len(self.ids)) for t in target_tokens(x)], np.int64)
                         for x in corpus[pid]]
        n = self.n_raw = len(self.ids)
        self.uni, self.df = np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.paper_uni: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.paper_bi: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        all_keys = []
        for pid, arrs in seqs.items():
            arrs = [a for a in arrs if len(a) > 1]
            toks = np.concatenate(arrs) if arrs else np.zeros(0, np.int64)
            prev = np.concatenate([np.concatenate([[0], a[:-1]]) for a in arrs]) if arrs else toks
            ids, cnt = np.unique(toks, return_counts=True)
            self.uni[ids] += cnt
            self.df[ids] += 1
            keys, bcnt = np.unique(prev * n + toks, return_counts=True)  # the first token follows a line start
            self.paper_uni[pid], self.paper_bi[pid] = (ids, cnt), (keys, bcnt)
            all_keys.append(np.repeat(keys, bcnt))
        self.bi_keys, self.bi_cnt = np.unique(np.concatenate(all_keys) if all_keys else np.zeros(0, np.int64),
                                              return_counts=True)
        self.u_of, self.v_of = self.bi_keys // n, self.bi_keys % n
        self.function = np.array([is_function_token(t) for t in self.ids], bool)


@dataclass
class _PaperModel:
    """Background of the corpus without one paper (dense per raw word id), with its function-class sums."""

    in_vocab: np.ndarray   # bool per raw id: in V_p (EOL/EOS always)
    p_uni: np.ndarray      # unigram probability per raw id (0 outside V_p)
    p_unk: float           # unigram probability of UNK
    ctx: np.ndarray        # count of each raw id as a left context
    types: np.ndarray      # distinct continuation types per context
    unk_cont: np.ndarray   # count of context u followed by an OOV word
    fn_cont: np.ndarray    # count of context u followed by an in-vocabulary function token
    p_fn: float            # unigram mass of the function class
    paper_keys: np.ndarray  # the left-out paper's bigram keys (sorted) and counts: subtracted at lookup
    paper_cnt: np.ndarray


class _Global:
    """Context statistics of the whole corpus for one ``min_papers``; a paper's model subtracts its own share."""

    def __init__(self, c: _Corpus, min_papers: int) -> None:
        n, u_of, v_of, bi = c.n_raw, c.u_of, c.v_of, c.bi_cnt.astype(float)
        self.in_vocab = c.df >= min_papers
        self.in_vocab[[0, 1]] = True
        self.bi = bi
        self.ctx = np.bincount(u_of, weights=bi, minlength=n)
        self.types = np.bincount(u_of, minlength=n).astype(float)
        self.unk_cont = np.bincount(u_of, weights=bi * ~self.in_vocab[v_of], minlength=n)
        self.fn_cont = np.bincount(u_of, weights=bi * (c.function & self.in_vocab)[v_of], minlength=n)
        self.by_v = np.argsort(v_of, kind="stable")  # bigram positions grouped by their second word
        self.v_start = np.searchsorted(v_of[self.by_v], np.arange(n + 1))


def _paper_model(c: _Corpus, g: _Global, paper_id: str, min_papers: int) -> _PaperModel:
    """The corpus without ``paper_id``: global counts minus the paper's (exactly a refit, in integer counts)."""
    n = c.n_raw
    uni, df = c.uni.copy(), c.df.copy()
    ctx, types, unk_cont, fn_cont = g.ctx.copy(), g.types.copy(), g.unk_cont.copy(), g.fn_cont.copy()
    keys, bcnt = c.paper_bi.get(paper_id, (_EMPTY, _EMPTY))
    if paper_id in c.paper_uni:
        ids, cnt = c.paper_uni[paper_id]
        uni[ids] -= cnt
        df[ids] -= 1
        pu, pv, pc = keys // n, keys % n, bcnt.astype(float)
        ctx -= np.bincount(pu, weights=pc, minlength=n)
        types -= np.bincount(pu[g.bi[np.searchsorted(c.bi_keys, keys)] == pc], minlength=n)
        unk_cont -= np.bincount(pu, weights=pc * ~g.in_vocab[pv], minlength=n)
        fn_cont -= np.bincount(pu, weights=pc * (c.function & g.in_vocab)[pv], minlength=n)
    in_vocab = df >= min_papers
    in_vocab[[0, 1]] = True
    dropped = np.flatnonzero(g.in_vocab & ~in_vocab)  # words only this paper kept in the vocabulary
    if len(dropped):
        pos = np.concatenate([g.by_v[g.v_start[w]:g.v_start[w + 1]] for w in dropped])
        left = g.bi[pos] - _lookup(keys, bcnt.astype(float), c.bi_keys[pos])
        unk_cont += np.bincount(c.u_of[pos], weights=left, minlength=n)
        fn_cont -= np.bincount(c.u_of[pos], weights=left * c.function[c.v_of[pos]], minlength=n)
    v_size = int(in_vocab.sum()) + 1
    n_tok = int(uni.sum())
    denom = n_tok + v_size  # add-one over V_p ∪ {EOL, EOS, UNK}
    p_uni = np.where(in_vocab, (uni + 1) / denom, 0.0)
    fn_in = c.function & in_vocab
    return _PaperModel(in_vocab, p_uni, (n_tok - int(uni[in_vocab].sum()) + 1) / denom, ctx, types, unk_cont,
                       fn_cont, (int(uni[fn_in].sum()) + int(fn_in.sum())) / denom, keys, bcnt.astype(float))


@dataclass
class _Source:
    """One conditioning text's copy statistics over its content tokens (sorted unique keys and their weights)."""

    uni_keys: np.ndarray
    uni_p: np.ndarray
    bi_keys: np.ndarray    # prev * K + tok
    bi_p: np.ndarray
    ctx_keys: np.ndarray   # prevs with at least one content continuation
    oov: np.ndarray        # its words outside V_p (sorted, unique)




def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query (keys sorted, unique), else 0."""
    if len(keys) == 0:
        return np.zeros(len(query))
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[pos] == query, values[pos], 0.0)


def _member(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """query ∈ keys (keys sorted, unique): np.isin without its sort."""
    if len(keys) == 0:
        return np.zeros(len(query), bool)
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return keys[pos] == query


class OfflineEstimator:
    """Normalised n-gram + content-copy LM over words, fitted leave-paper-out on the corpus of human judgment lines."""

    def __init__(self, corpus: Mapping[str, Sequence[str]], lam: float = DEFAULT_LAM, beta: float = DEFAULT_BETA,
                 eps: float = DEFAULT_EPS, min_papers: int = DEFAULT_MIN_PAPERS, dedup: bool = DEFAULT_DEDUP) -> None:
        if not 0.0 <= lam < 0.5 or not 0.0 <= beta <= 1.0:
            raise ValueError("need 0 <= lam < 0.5 (two sources share the copy mass) and 0 <= beta <= 1")
        self.lam, self.beta, self.eps, self.min_papers, self.dedup = lam, beta, eps, min_papers, dedup
        self._c = _Corpus(corpus)
        self._g = _Global(self._c, min_papers)
        self._ids = dict(self._c.ids)  # grows with words never seen in the corpus (always OOV)
        self._unk = self._ids.setdefault(UNK, len(self._ids))  # the "any other OOV word" entry of the space
        self._tok_cache: dict[str, np.ndarray] = {}
        self._cache: OrderedDict[str, tuple[_PaperModel, dict]] = OrderedDict()
        self.id = (f"offline:wb-bigram+content-copy:lam={lam:g}:beta={beta:g}:eps={eps:g}:minpapers={min_papers}"
                   f":copy={'types' if dedup else 'tokens'}:fn={_STOP_DIGEST}:lower-words"
                   f":corpus={corpus_digest(corpus)}")

    # -- token ids and cached per-paper state ---------------------------------------------------------------------
    def _tokens(self, text: str | None, eos: bool = False) -> np.ndarray:
        key = ("\x01" if eos else "\x00") + (text or "")
        arr = self._tok_cache.get(key)
        if arr is None:
            toks = target_tokens(text or "") if eos else tokenize(text)
            arr = np.array([self._ids.setdefault(t, len(self._ids)) for t in toks], np.int64)
            if len(self._tok_cache) > 50_000:
                self._tok_cache.clear()
            self._tok_cache[key] = arr
        return arr

    def _paper(self, paper_id: str) -> tuple[_PaperModel, dict]:
        hit = self._cache.get(paper_id)
        if hit is None:
            hit = self._cache[paper_id] = (_paper_model(self._c, self._g, paper_id, self.min_papers), {})
            if len(self._cache) > 2:
                self._cache.popitem(last=False)
        return hit

    def _oov(self, m: _PaperModel, ids: np.ndarray) -> np.ndarray:
        known = ids < self._c.n_raw
        return ~(known & m.in_vocab[np.where(known, ids, 0)])

    def _content(self, m: _PaperModel, ids: np.ndarray) -> np.ndarray:
        known = ids < self._c.n_raw
        ids0 = np.where(known, ids, 0)
        return ~(known & m.in_vocab[ids0] & self._c.function[ids0])

    def _source(self, m: _PaperModel, memo: dict, text: str) -> _Source:
        src = memo.get(("src", text))
        if src is None:
            ids = self._tokens(text)
            prev = np.concatenate([[0], ids[:-1]])
            content = self._content(m, ids)
            u, uc = np.unique(ids[content], return_counts=True)
            b, bc = np.unique(prev[content] * _K + ids[content], return_counts=True)
            if self.dedup:
                uc, bc = np.ones_like(uc), np.ones_like(bc)
            ctx_of = b // _K
            c_keys, c_inv = np.unique(ctx_of, return_inverse=True)
            c_tot = np.bincount(c_inv, weights=bc)
            src = memo[("src", text)] = _Source(u, uc / max(uc.sum(), 1), b, bc / np.maximum(c_tot[c_inv], 1), c_keys,
                                                np.unique(ids[self._oov(m, ids)]))
        return src

    # -- the model ------------------------------------------------------------------------------------------------
    def _background(self, m: _PaperModel, prev: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """P_bg(tok | prev) (tokens outside V_p get the whole P_bg(UNK | prev)) and the content mass M_c(prev)."""
        n = self._c.n_raw
        known, pknown = ids < n, prev < n
        ids0, pid0 = np.where(known, ids, 0), np.where(pknown, prev, 0)
        inv = known & m.in_vocab[ids0]
        p_uni = np.where(inv, m.p_uni[ids0], m.p_unk)
        pinv = pknown & m.in_vocab[pid0]
        ctx, types = m.ctx[pid0], m.types[pid0]
        query = pid0 * n + ids0
        cnt = _lookup(self._c.bi_keys, self._g.bi, query) - _lookup(m.paper_keys, m.paper_cnt, query)
        cnt = np.where(known & pknown, cnt, 0.0)
        cnt = np.where(inv, cnt, m.unk_cont[pid0])
        has_ctx = pinv & (ctx + types > 0)
        denom = np.where(has_ctx, ctx + types, 1.0)
        bg = np.where(has_ctx, (cnt + types * p_uni) / denom, p_uni)
        p_fn = np.where(has_ctx, (m.fn_cont[pid0] + types * m.p_fn) / denom, m.p_fn)
        return bg, 1.0 - p_fn

    def _components(self, m: _PaperModel, memo: dict, prev: np.ndarray, ids: np.ndarray,
                    req: LogprobRequest) -> tuple[np.ndarray, ...]:
        srcs = [self._source(m, memo, x) for x in (req.synopsis, req.first_review) if x]
        c_oov = np.union1d(srcs[0].oov, srcs[1].oov) if len(srcs) == 2 else srcs[0].oov if srcs else _EMPTY
        eps = min(self.eps, 0.5 / len(c_oov)) if len(c_oov) else self.eps
        key = ("bg", ids.tobytes(), prev.tobytes())
        if key not in memo:  # the same target is scored against every candidate: its background once per paper
            memo[key] = (*self._background(m, prev, ids), self._oov(m, ids), self._content(m, ids).astype(float))
        bg, mc, oov, content = memo[key]
        if oov.any():  # an OOV token is one specific word: share eps of the UNK mass (UNK itself: the rest)
            bg = np.where(oov, np.where(ids == self._unk, bg * (1.0 - eps * len(c_oov)), bg * eps), bg)
        out = [bg, content, mc]
        for s in srcs:
            active = np.full(len(ids), float(len(s.uni_keys) > 0))
            out += [_lookup(s.uni_keys, s.uni_p, ids), _lookup(s.bi_keys, s.bi_p, prev * _K + ids),
                    _member(s.ctx_keys, prev).astype(float), active]
        return tuple(out)

    def components(self, req: LogprobRequest) -> tuple[np.ndarray, ...]:
        """Per target token: background, content flag, M_c, then per source (unigram copy, bigram copy,
        bigram-defined flag, source-has-content flag)."""
        m, memo = self._paper(req.paper_id)
        ids = self._tokens(req.target, eos=True)
        return self._components(m, memo, np.concatenate([[0], ids[:-1]]), ids, req)

    def mix(self, comps: Sequence[np.ndarray], lam: float | None = None, beta: float | None = None) -> np.ndarray:
        """Per-token probability of the mixture for given weights (used by scoring and by the weight fit)."""
        lam = self.lam if lam is None else lam
        beta = self.beta if beta is None else beta
        bg, content, mc = comps[:3]
        lam_total = np.zeros_like(bg)
        copy = np.zeros_like(bg)
        for k in range((len(comps) - 3) // 4):
            uni, bi, has, active = comps[3 + 4 * k: 7 + 4 * k]
            lam_total += lam * active
            copy += lam * active * ((1.0 - beta * has) * uni + beta * has * bi)
        return np.where(content > 0, (1.0 - lam_total) * bg + mc * copy, bg)

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed natural-log probabilities of each target (EOL and EOS tokens included)."""
        out: list[LogprobResult | None] = [None] * len(requests)
        for i in sorted(range(len(requests)), key=lambda j: requests[j].paper_id):  # one paper model at a time
            p = self.mix(self.components(requests[i]))
            out[i] = LogprobResult(float(np.log(p).sum()), len(p))
        return out  # type: ignore[return-value]

    def next_token_distribution(self, context_tokens: Sequence[str], conditioning: LogprobRequest) -> dict[str, float]:
        """The full next-token distribution after ``context_tokens`` over the request's token space (sums to 1)."""
        m, memo = self._paper(conditioning.paper_id)
        srcs = [self._tokens(x) for x in (conditioning.synopsis, conditioning.first_review) if x]
        c_oov = sorted({int(i) for s in srcs for i in s[self._oov(m, s)]})
        vocab = np.flatnonzero(m.in_vocab)
        space = np.concatenate([vocab, np.array(c_oov, np.int64), [self._unk]]).astype(np.int64)
        prev = self._ids.setdefault(context_tokens[-1], len(self._ids)) if context_tokens else 0
        p = self.mix(self._components(m, memo, np.full(len(space), prev, np.int64), space, conditioning))
        names = {i: t for t, i in self._ids.items()}
        return {names[int(i)]: float(x) for i, x in zip(space, p, strict=True)}


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


def check_offline_arg(arg: str) -> None:
    """The offline estimator takes no argument (``offline:foo`` is refused by the setup check)."""
    if arg:
        raise ValueError(f"the offline estimator takes no argument (write `offline`), got offline:{arg}")


@ESTIMATORS.register("offline", spec="offline",
                     summary="embedded word-level model (bigram + content copy): a fast proxy, not a language model",
                     proxy=True, needs_corpus=True, in_process=True, check_arg=check_offline_arg,
                     label=lambda _id: "offline word model (fast proxy)",
                     tolerance=lambda _id: 1e-9)  # float64 counts, no batching effects: the same every time
def make_offline(arg: str, context: EstimatorContext) -> OfflineEstimator:
    """The offline estimator fitted leave-paper-out on the corpus of human judgment lines (takes no argument)."""
    check_offline_arg(arg)
    assert context.corpus is not None  # resolve_estimator checks needs_corpus
    return OfflineEstimator(context.corpus)
