"""The weight buffers llama.cpp is told to use, by the CPU it runs on."""

from __future__ import annotations

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
