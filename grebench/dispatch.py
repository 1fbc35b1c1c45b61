"""A streaming dispatcher: requests flow to a pool of servers as each frees a slot, no batch barrier.

The scoring of a conference year sends about a million log-prob requests to a few or many evaluation-LM servers
(vLLM, SGLang, or a router in front of several), and the candidates' generation sends thousands of calls to many
providers and local servers.  :class:`Dispatcher` is what both send them through:

- **No barrier.**  Each server has ``per_server`` worker threads (the cap on its requests in flight); a worker
  takes the next request the moment its last one is answered, so a slow request holds one slot, never the pool.
- **A paper stays on one server.**  Requests carry a group key (the paper id).  Groups are placed on servers by
  rendezvous (highest-random-weight) hashing of the key, bounded by load ("consistent hashing with bounded loads",
  Mirrokni, Thorup and Zadimoghaddam 2018): a group goes to its first-ranked server unless that server already has
  more than ``load_bound`` times its fair share of the modelled cost.  A paper's requests share the abstract and
  references as prompt prefixes, so one server's prefix cache (vLLM's automatic prefix caching, SGLang's radix
  cache) computes them once.  Round-robin (``routing="round-robin"``) scatters them, for comparison.
- **Idle servers steal whole papers not yet started** from the most loaded server, so the tail is balanced without
  splitting a paper whose prefix is already cached somewhere.
- **Pinned groups** (``routing="pinned"``): a group key that is a server (a provider, a candidate's server) goes
  there and nowhere else; the LLM client's generation uses this, each provider with its own cap
  (``per_server`` may map a server to its cap).
- **Failover.**  A request that fails with a retryable error (connection refused or reset, time-out, HTTP 429 or
  5xx) marks its server down: the server's queued papers, and the failed request, move to the servers that are up
  (by the same hashing), and the server is tried again after an exponential back-off (``probe`` first, where one is
  given), one request at a time until one is answered.  A request is charged an attempt when it fails on a healthy
  server, or on any server while no other is up; at ``max_attempts`` it fails the run.  A server that stays dead
  through a season's many back-offs so never uses up the attempts of the requests it takes on probation.  A request
  that fails for another reason (HTTP 4xx, an answer that is not a log-prob response) fails the run at once.
- **Results are handed over as they arrive**, to ``on_result`` on the calling thread (the one store writer), so a
  stop or a crash loses nothing already answered.  The caller's thread also watches the stop token
  (:mod:`grebench.stop`): a stop ends the run within a poll interval, requests in flight being left to end on
  their own (daemon threads nobody waits for).
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from grebench import stop

P = TypeVar("P")
R = TypeVar("R")

ROUTINGS = ("paper", "round-robin", "pinned")


class DispatchError(RuntimeError):
    """A request failed for good: a non-retryable answer, or every attempt on every server."""


@dataclass
class ServerStats:
    """What one server did in a run."""

    url: str
    answered: int = 0
    failed: int = 0
    down_events: int = 0
    max_in_flight: int = 0
    groups: set[str] = field(default_factory=set)


@dataclass
class DispatchStats:
    """What a run did: per server, and the requests moved off a server that went down or stolen by an idle one."""

    servers: list[ServerStats]
    moved: int = 0
    stolen_groups: int = 0
    retried: int = 0


def rendezvous_rank(key: str, urls: Sequence[str]) -> list[int]:
    """Server indices ordered by rendezvous weight for ``key`` (stable: the same key ranks the same servers the same
    way on every run and every machine, and removing a server moves only the keys it held)."""
    def weight(i: int) -> bytes:
        return hashlib.blake2b(f"{urls[i]}\x00{key}".encode(), digest_size=8).digest()

    return sorted(range(len(urls)), key=weight, reverse=True)


def default_retryable(exc: BaseException) -> bool:
    """Whether a failure says the server (not the request) is at fault: a transport error, a time-out, 429 or 5xx.
    An exception may say so itself with a ``retryable`` attribute."""
    flag = getattr(exc, "retryable", None)
    if isinstance(flag, bool):
        return flag
    import httpx

    if isinstance(exc, httpx.TransportError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        code = exc.response.status_code
        return code == 429 or code >= 500
    return False


@dataclass
class _Group:
    key: str
    items: deque[int]
    cost: float
    started: bool = False


@dataclass
class _Server:
    index: int
    url: str
    queue: deque[_Group] = field(default_factory=deque)
    current: _Group | None = None
    queued_cost: float = 0.0
    in_flight: int = 0
    down_until: float = 0.0
    failures: int = 0
    probing: bool = False

    @property
    def up(self) -> bool:
        return self.down_until <= time.monotonic()


class Dispatcher(Generic[P, R]):
    """Streams payloads to ``urls`` through ``call(url, payload)``: see the module docstring."""

    def __init__(self, urls: Sequence[str], call: Callable[[str, P], R], *, per_server: int | Mapping[str, int] = 8,
                 routing: str = "paper", backoff_s: float = 1.0, max_backoff_s: float = 60.0, max_attempts: int = 5,
                 retryable: Callable[[BaseException], bool] = default_retryable,
                 probe: Callable[[str], bool] | None = None, load_bound: float = 1.25) -> None:
        if not urls:
            raise ValueError("the dispatcher needs at least one server URL")
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, not {routing!r}")
        self.urls = list(urls)
        caps = per_server if isinstance(per_server, Mapping) else dict.fromkeys(self.urls, per_server)
        self.caps = {u: max(1, int(caps.get(u, 1))) for u in self.urls}
        self.call, self.routing = call, routing
        self.backoff_s, self.max_backoff_s, self.max_attempts = backoff_s, max_backoff_s, max(1, max_attempts)
        self.retryable, self.probe, self.load_bound = retryable, probe, max(1.0, load_bound)
        self.stats = DispatchStats([ServerStats(u) for u in self.urls])

    # -- placement (called with the lock held) ---------------------------------------------------------------------

    def _place(self, group: _Group, servers: list[_Server], exclude: int | None = None) -> None:
        if self.routing == "pinned":  # the group is its server
            target = next(s for s in servers if s.url == group.key)
            target.queue.append(group)
            target.queued_cost += group.cost
            return
        live = [s for s in servers if s.index != exclude and s.up] or [s for s in servers if s.index != exclude] \
            or servers
        if self.routing == "round-robin":
            target = min(live, key=lambda s: (s.queued_cost, s.index))
        else:
            total = sum(s.queued_cost for s in live) + group.cost
            bound = self.load_bound * total / len(live)
            ranked = [servers[i] for i in rendezvous_rank(group.key, self.urls) if servers[i] in live]
            target = next((s for s in ranked if s.queued_cost + group.cost <= bound), ranked[0])
        target.queue.append(group)
        target.queued_cost += group.cost

    def _take(self, s: _Server, servers: list[_Server], costs: Sequence[float]) -> int | None:
        """The next payload index for server ``s``: its current paper, then its next one, then a paper stolen from
        the most loaded server that has one not yet started."""
        while True:
            if s.current is not None and s.current.items:
                idx = s.current.items.popleft()
                s.queued_cost -= costs[idx]
                return idx
            s.current = None
            if s.queue:
                s.current = s.queue.popleft()
                s.current.started = True
                self.stats.servers[s.index].groups.add(s.current.key)
                continue
            if self.routing != "paper":
                return None
            victims = sorted((v for v in servers if v is not s and any(not g.started for g in v.queue)),
                             key=lambda v: v.queued_cost, reverse=True)
            if not victims:
                return None
            victim = victims[0]
            group = next(g for g in reversed(victim.queue) if not g.started)
            victim.queue.remove(group)
            victim.queued_cost -= group.cost
            s.queue.append(group)
            s.queued_cost += group.cost
            self.stats.stolen_groups += 1

    def _evacuate(self, s: _Server, servers: list[_Server], returned: int | None, costs: Sequence[float],
                  groups: Sequence[str]) -> None:
        """Move a down server's queued work (and a request it failed) to the servers that are up; with pinned
        groups, the failed request goes back to the front of its server's queue and waits for its back-off."""
        if self.routing == "pinned":
            if returned is not None:
                group = s.current
                if group is None:
                    group = _Group(groups[returned], deque(), 0.0, started=True)
                    s.current = group
                group.items.appendleft(returned)
                s.queued_cost += costs[returned]
            return
        moving: list[_Group] = []
        if s.current is not None and s.current.items:
            moving.append(s.current)
        s.current = None
        moving.extend(s.queue)
        s.queue.clear()
        s.queued_cost = 0.0
        if returned is not None:
            for g in moving:
                if g.key == groups[returned]:
                    g.items.appendleft(returned)
                    g.cost += costs[returned]
                    break
            else:
                moving.append(_Group(groups[returned], deque([returned]), costs[returned]))
        for g in moving:
            g.started = False
            g.cost = sum(costs[i] for i in g.items)
            self.stats.moved += len(g.items)
            self._place(g, servers, exclude=s.index)

    # -- the run ---------------------------------------------------------------------------------------------------

    def run(self, payloads: Sequence[P], groups: Sequence[str] | None = None, costs: Sequence[float] | None = None,
            on_result: Callable[[int, R], None] | None = None) -> list[R]:
        """Answer every payload; ``groups[i]`` is payload i's group key (its paper), ``costs[i]`` its modelled
        cost (its tokens).  ``on_result(i, answer)`` is called on this thread as each answer arrives.  Returns the
        answers in payload order; raises :class:`DispatchError` when one fails for good (every answer handed over
        before that has been given to ``on_result``)."""
        n = len(payloads)
        if n == 0:
            return []
        keys = list(groups) if groups is not None else [str(i) for i in range(n)]
        weights = [float(c) for c in costs] if costs is not None else [1.0] * n
        if len(keys) != n or len(weights) != n:
            raise ValueError("groups and costs must have one entry per payload")
        if self.routing == "pinned" and not set(keys) <= set(self.urls):
            raise ValueError(f"pinned groups must name servers: {sorted(set(keys) - set(self.urls))[:3]}")
        servers = [_Server(i, u) for i, u in enumerate(self.urls)]
        by_key: dict[str, _Group] = {}
        order: list[_Group] = []
        for i, k in enumerate(keys):
            g = by_key.get(k)
            if g is None:
                g = by_key[k] = _Group(k, deque(), 0.0)
                order.append(g)
            g.items.append(i)
            g.cost += weights[i]
        lock = threading.Condition()
        attempts = [0] * n
        answers: list[Any] = [None] * n
        outbox: queue.SimpleQueue[tuple[int, Any, BaseException | None]] = queue.SimpleQueue()
        state = {"left": n, "abort": False}
        with lock:
            if self.routing == "round-robin":  # request by request, as the old client did
                turn = 0
                for g in order:
                    for i in g.items:
                        target = servers[turn % len(servers)]
                        turn += 1
                        target.queue.append(_Group(g.key, deque([i]), weights[i]))
                        target.queued_cost += weights[i]
            else:
                for g in order:
                    self._place(g, servers)

        def worker(s: _Server) -> None:
            st = self.stats.servers[s.index]
            while True:
                with lock:
                    idx: int | None = None
                    while not state["abort"] and state["left"] > 0:
                        now = time.monotonic()
                        if not s.up:
                            lock.wait(timeout=min(stop.POLL_S, max(0.01, s.down_until - now)))
                            continue
                        if s.failures and self.probe is not None and not s.probing:
                            s.probing = True  # one worker probes a server coming back; the others wait for it
                            break
                        if s.probing or (s.failures and s.in_flight):
                            # a server coming back takes one request at a time until one is answered
                            lock.wait(timeout=stop.POLL_S)
                            continue
                        idx = self._take(s, servers, weights)
                        if idx is not None:
                            break
                        lock.wait(timeout=stop.POLL_S)  # work may come back from a server that goes down
                    if state["abort"] or state["left"] <= 0:
                        return
                    if idx is not None:
                        s.in_flight += 1
                        st.max_in_flight = max(st.max_in_flight, s.in_flight)
                if idx is None:  # the probe of a server coming back
                    ok = False
                    try:
                        ok = bool(self.probe(s.url))  # type: ignore[misc]
                    except Exception:
                        ok = False
                    with lock:
                        s.probing = False
                        if ok:
                            s.failures = 0
                        else:
                            s.failures += 1
                            s.down_until = time.monotonic() + self._backoff(s.failures)
                        lock.notify_all()
                    continue
                try:
                    answer = self.call(s.url, payloads[idx])
                except BaseException as exc:
                    with lock:
                        s.in_flight -= 1
                        st.failed += 1
                        retryable = isinstance(exc, Exception) and self.retryable(exc)
                        # a server on probation (down before) failing again says nothing new about the request:
                        # it is charged only where no other server is up to take it
                        if not (retryable and s.failures and any(o.up for o in servers if o is not s)):
                            attempts[idx] += 1
                        if not retryable or attempts[idx] >= self.max_attempts:
                            state["abort"] = True
                            outbox.put((idx, None, exc))
                            lock.notify_all()
                            return
                        self.stats.retried += 1
                        if s.up:  # the first failure seen on this server marks it down
                            s.failures += 1
                            st.down_events += 1
                            s.down_until = time.monotonic() + self._backoff(s.failures)
                        self._evacuate(s, servers, idx, weights, keys)
                        lock.notify_all()
                    continue
                with lock:
                    s.in_flight -= 1
                    if s.failures and self.probe is None:
                        s.failures = 0  # a real request went through: the server is back
                    st.answered += 1
                    state["left"] -= 1
                    lock.notify_all()
                outbox.put((idx, answer, None))

        threads = [threading.Thread(target=worker, args=(s,), daemon=True, name=f"dispatch-{s.index}-{j}")
                   for s in servers for j in range(min(self.caps[s.url], n))]
        for t in threads:
            t.start()
        got = 0
        try:
            while got < n:
                try:
                    idx, answer, exc = outbox.get(timeout=stop.POLL_S)
                except queue.Empty:
                    stop.check()
                    continue
                if exc is not None:
                    if isinstance(exc, DispatchError) or not isinstance(exc, Exception):
                        raise exc  # a stop (Interrupted) or an interrupt is raised as it is
                    raise DispatchError(f"request {idx} (group {keys[idx]!r}) failed after {attempts[idx]} "
                                        f"attempt(s): {exc}") from exc
                answers[idx] = answer
                got += 1
                if on_result is not None:
                    on_result(idx, answer)
                stop.check()
        finally:
            with lock:
                state["abort"] = True
                lock.notify_all()
        return answers

    def _backoff(self, failures: int) -> float:
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** max(0, failures - 1)))


__all__ = ["ROUTINGS", "DispatchError", "DispatchStats", "Dispatcher", "ServerStats", "default_retryable",
           "rendezvous_rank"]
