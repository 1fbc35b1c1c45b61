"""Local candidates' batches decoded on Ray actors (``executor = ray``), each actor holding its own copy of the model.

The batch plan is made here, once, exactly as in-process generation makes it (:meth:`LocalGenerator.plan`: from the
prompts, the checkpoint's shape, ``max_tokens`` and ``local_batch_mib``, never from the machine), and each of its
batches is decoded whole by one actor with :meth:`LocalGenerator.decode`: the rows padded together are the plan's,
so an actor writes the text this process would (same engine, dtype and threads).  Batches go out as actors free up
(:data:`IN_FLIGHT_PER_ACTOR` queued on each) and come back through ``ray.wait`` to the caller's thread, the one
store writer, which writes each batch as it arrives: a crash loses at most the batches in flight, and a rerun plans
what is left.  Ray restarts an actor whose process dies and runs its batches again (``max_restarts``,
``max_task_retries``); a batch's texts reach the writer once (its object ref resolves once).

Actors: ``ray_actors``, or one per GPU when the model runs on CUDA and the cluster has GPUs, else one per CPU
(each with one CPU and one torch thread, so their texts are those of a one-thread process).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grebench import stop
from grebench.cluster import ray_session
from grebench.runtime._generate import BatchPlan, Generated, LocalGenerator

log = logging.getLogger(__name__)

#: Batches queued on each actor: one decoding, one waiting.
IN_FLIGHT_PER_ACTOR = 2
#: Times Ray restarts a dead actor, and retries a batch it held.
ACTOR_RESTARTS = 4
TASK_RETRIES = 4


class GenerationActor:
    """One Ray actor's copy of a local model, loaded on its first batch."""

    def __init__(self, path: str, device: str, dtype: str, label: str, threads: int) -> None:
        self.args = (path, device, dtype, label)
        self.threads = threads
        self.gen: LocalGenerator | None = None

    def pid(self) -> int:
        return os.getpid()

    def decode(self, plan: BatchPlan, index: int, prompts: Mapping[str, Sequence[int]]) -> tuple[int, list[Generated]]:
        """(this process's id, the texts of batch ``index`` of ``plan``)."""
        if self.gen is None:
            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
            self.gen = LocalGenerator(*self.args)
        return os.getpid(), self.gen.decode(plan, index, prompts)


def ray_actor_count(settings_actors: int, device: str, resources: Mapping[str, float],
                    batches: int) -> tuple[int, bool]:
    """(actors, whether each gets a GPU): ``ray_actors`` when set, else one per GPU for a CUDA model on a cluster with
    GPUs, else one per CPU; never more than there are batches."""
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 1))
    gpu = device.startswith("cuda") and gpus > 0
    count = settings_actors or (gpus if gpu else cpus)
    return max(1, min(count, batches)), gpu


def generate_on_ray(address: str, actors: int, path: str, device: str, dtype: str, label: str, plan: BatchPlan,
                    prompts: Mapping[str, Sequence[int]], on_batch: Callable[[list[Generated]], None],
                    on_progress: Callable[[int], None] | None = None) -> list[int]:
    """Decode every batch of ``plan`` on Ray actors, handing each batch's texts to ``on_batch`` on this thread as it
    arrives (in completion order); ``on_progress(slots)`` after each batch with its token slots.  A stop request
    is honoured between arrivals (the actors are killed; the batches not yet handed over are decoded by the next
    run).  Returns the process ids that decoded the batches."""
    pids: list[int] = []
    with ray_session(address) as ray:
        count, gpu = ray_actor_count(actors, device, ray.cluster_resources(), len(plan.batches))
        remote = ray.remote(GenerationActor).options(max_restarts=ACTOR_RESTARTS, max_task_retries=TASK_RETRIES,
                                                     num_cpus=0 if gpu else 1, num_gpus=1 if gpu else 0)
        pool = [remote.remote(path, device, dtype, label, 0 if gpu else 1) for _ in range(count)]
        log.info("local generation %s on Ray: %d batch(es) over %d actor(s)", label, len(plan.batches), count)
        try:
            todo = deque(range(len(plan.batches)))
            running: dict[Any, tuple[int, int]] = {}  # ref -> (actor, batch)
            queued = [0] * count

            def submit(actor: int) -> None:
                while todo and queued[actor] < IN_FLIGHT_PER_ACTOR:
                    index = todo.popleft()
                    rows = {k: list(prompts[k]) for k in plan.batches[index]}
                    running[pool[actor].decode.remote(plan, index, rows)] = (actor, index)
                    queued[actor] += 1

            for actor in range(count):
                submit(actor)
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                actor, index = running.pop(ready[0])
                queued[actor] -= 1
                pid, texts = ray.get(ready[0])
                pids.append(pid)
                on_batch(texts)
                if on_progress is not None:
                    on_progress(len(plan.batches[index]) * plan.max_new_tokens)
                stop.check()
                submit(actor)
        finally:
            for handle in pool:
                ray.kill(handle, no_restart=True)
    return pids
