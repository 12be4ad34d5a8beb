"""What llama.cpp is told to use by the machine it runs on: weight buffers by the CPU, threads by
the cores the process may run on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xlrag.chains.local.loaded import plain_weight_buffers, use_plain_weight_buffers

# /proc/cpuinfo of the sandboxed Xeon where AMX buffers killed llama.cpp (flags shortened)
AMX_XEON = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512_vnni amx_bf16 amx_tile amx_int8
bogomips\t: 4200.00
"""
AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma\n"


@pytest.mark.parametrize(("cpuinfo", "plain"), [
    (AMX_XEON, True),
    (AVX2_ONLY, False),
    ("", False),  # no flags line (another kernel's format): llama.cpp keeps its own choice
    # a flag named like it is not it, and a model name is not a flag
    ("model name\t: amx_tile special\nflags\t\t: avx2 amx_tiles\n", False),
])
def test_plain_buffers_where_the_cpu_advertises_amx(cpuinfo: str, plain: bool) -> None:
    assert plain_weight_buffers(cpuinfo) is plain


def test_this_machine_loads_models_with_the_buffers_its_cpu_calls_for() -> None:
    import llama_cpp.llama_cpp as llama_cpp  # the dev install has it: no skip

    with open("/proc/cpuinfo", encoding="utf-8") as f:
        expected = plain_weight_buffers(f.read())
    assert use_plain_weight_buffers() is expected
    assert use_plain_weight_buffers() is expected  # idempotent: the defaults are wrapped once
    assert llama_cpp.llama_model_default_params().use_extra_bufts is not expected


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_a_model_without_a_thread_count_runs_on_the_cores_the_process_may_use() -> None:
    # a child process held to one core, as taskset or a container's cpuset holds one
    one = min(os.sched_getaffinity(0))
    code = (f"import os; os.sched_setaffinity(0, {{{one}}}); "
            "from xlrag.chains.local.loaded import usable_cores; "
            "from xlrag.chains.local.runtime import LocalLlamaChat; "
            "llm = LocalLlamaChat(entry='gemma-3-270m', n_ctx=256); "
            "print(usable_cores(), llm.native()[0].n_threads)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    # one, not os.cpu_count(), which counts the cores the set keeps the process off
    assert out.stdout.split() == ["1", "1"], out.stdout
