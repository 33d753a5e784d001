"""What "vllm would print" shows about memory beyond the KV lines (issue 25), and the plan's table
at 80 columns with the cache dtype spelled as vLLM spells it.

Each test fails on the code before these lines were added: the plan printed no "Model loading
took" line, no start-up usage line, the profile's lines with ``--kv-cache-memory`` (vLLM skips the
profile), a KV table 90 columns wide and ``KV cache bf16``.
"""

from __future__ import annotations

from helpers import bundled_shape

from kvcalc.engines.vllm.messages import usage_line
from kvcalc.planning.core import plan
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB, MIB

#: the catalog's H100 (79.22 GiB) and what is free once vLLM's CUDA context is up (less 0.51 GiB)
H100, FREE = 85_061_827_297, 84_514_218_967


def _plan(**kw):
    return plan(bundled_shape("llama-3.1-8b"), PlanInputs(gpu="H100-80GB", **kw))


def test_model_loading_and_usage_lines():
    # Llama-3.1-8B on an H100 at the default 0.92 (vLLM 0.33). kvcalc's terms, per GPU:
    # weights 16,094,077,440 B (14.99 GiB: with 32 layers' fp32 attention scales, 512 B), non-torch 279,172,874, activation 2,029,240,976,
    # graphs 813,897,608 (0.76 GiB). vLLM's usage line (gpu_worker.py compile_or_warm_up_model):
    #   requested = ceil(0.92 × 85,061,827,297) = 78,256,881,114 (72.88 GiB)
    #   consumed = weights + non-torch = 16,373,250,314 (15.25 GiB)
    #   peak activation = activation + the graph estimate it subtracted = 2,843,138,584 (2.65 GiB)
    #   non-KV = consumed + peak + graphs = 20,030,286,506 (the graphs count twice, as vLLM counts)
    #   to requested = 78,256,881,114 − 20,030,286,506 − 150 MiB = 58,069,308,208 (54.08 GiB)
    #   to the GPU = 84,514,218,967 − 20,030,286,506 − 150 MiB = 64,326,646,061 (59.91 GiB)
    #   in use = the available KV memory, 59,040,492,216 B (54.99 GiB)
    r = _plan()
    m = r.memory
    assert (m.weights_bytes, m.non_torch_bytes, m.activation_bytes, m.cudagraph_bytes) == (
        16_094_077_440, 279_172_874, 2_029_240_976, 813_897_608)  # fmt: skip
    assert r.available_kv_bytes == 59_040_492_216
    assert r.log_lines[0] == "Model loading took 14.99 GiB memory and … seconds"
    assert r.log_lines[1] == "Available KV cache memory: 54.99 GiB"
    assert r.log_lines[-1] == (
        "Free memory on device (78.71/79.22 GiB) on startup. Desired GPU memory utilization is "
        "(0.92, 72.88 GiB). Actual usage is 15.25 GiB for consumed memory (weights + non-torch), "
        "2.65 GiB for peak activation, and 0.76 GiB for CUDAGraph memory. Replace "
        "gpu_memory_utilization config with `--kv-cache-memory=58069308208` (54.08 GiB) to fit into "
        "requested memory, or `--kv-cache-memory=64326646061` (59.91 GiB) to fully utilize gpu "
        "memory. Current kv cache memory in use is 54.99 GiB."
    )
    assert 58_069_308_208 == 78_256_881_114 - 20_030_286_506 - 150 * MIB


def test_usage_line_against_the_h100_sweep_record():
    # repolog-llmd-llama31-8b-h100-tp1-8k (vLLM 0.19, which did not subtract its graphs, so the
    # peak activation is the torch peak alone): requested ceil(0.95 × 79.19 GiB), 14.99 weights +
    # 0.25 non-torch, 1.89 peak, 0.91 graphs → 75.23 − 18.04 − 0.146 = 57.04 GiB; vLLM printed
    # `--kv-cache-memory=61258029056` (57.05 GiB: its figures are not rounded to 0.01 GiB)
    line = usage_line(free_bytes=round(78.68 * GIB), total_bytes=round(79.19 * GIB),
                      utilization=0.95, consumed_bytes=round(15.24 * GIB),
                      peak_activation_bytes=round(1.89 * GIB), cudagraph_bytes=round(0.91 * GIB),
                      available_kv_bytes=round(58.11 * GIB))  # fmt: skip
    printed = int(line.split("`--kv-cache-memory=")[1].split("`")[0])
    assert abs(printed - 61_258_029_056) < 0.02 * GIB


def test_given_kv_cache_memory_skips_the_profile_lines():
    # with --kv-cache-memory vLLM returns from determine_available_memory before profiling: no
    # "Available KV cache memory", no CUDA-graph profiling line, no usage line; it says instead
    # "Initial free memory 78.71 GiB, reserved 40.0 GiB ..." (format_gib: 40.0, not 40.00)
    r = _plan(kv_cache_memory_bytes=40 * GIB)
    assert r.log_lines[0] == "Model loading took 14.99 GiB memory and … seconds"
    assert r.log_lines[1].startswith(
        "Initial free memory 78.71 GiB, reserved 40.0 GiB memory for KV Cache as specified by "
        "kv_cache_memory_bytes config and skipped memory profiling."
    )
    # 40 GiB // 2 MiB blocks = 20,480 blocks = 327,680 tokens; 20,480 / 8,192 = 2.50x
    assert r.log_lines[2] == (
        "GPU KV cache size: 327,680 tokens, Maximum concurrency for 131,072 tokens per request: 2.50x"
    )
    assert len(r.log_lines) == 3
    assert not any(line.startswith(("Available KV", "CUDA graph memory")) for line in r.log_lines)


def test_no_usage_line_where_vllm_stops_before_its_graphs():
    # a request longer than the cache holds: vLLM raises in its KV configuration, before capture
    r = _plan(gpu_memory_utilization=0.25)
    assert r.verdict == "wont-start"
    assert r.log_lines[0].startswith("Model loading took")
    assert r.log_lines[-1].startswith("To serve at least one request")


def test_older_profiles_keep_their_lines():
    # the lines were read in the 0.28.0 and 0.33.0 wheels; 0.21 logs the usage line at DEBUG
    r = _plan(engine_version="0.21")
    assert not any(line.startswith(("Model loading", "Free memory")) for line in r.log_lines)
    assert _plan(engine_version="0.28").log_lines[0].startswith("Model loading took 14.99 GiB")


def test_kv_table_fits_80_columns_and_header_spells_bfloat16(cli):
    out = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--prompt-len", "1000", "--output-len",
              "500").stdout  # fmt: skip
    header = out.splitlines()[0]
    assert header.endswith("KV cache bfloat16")  # vLLM's CacheDType spelling; the JSON keeps bf16
    table = [line for line in out.splitlines() if line[:1] in "┌│└" and "KV per token" in out]
    assert table and max(len(line) for line in table) <= 80
    data = cli("plan", "llama-3.1-8b", "--gpu", "H100", "--json").json
    assert data["kv_cache_dtype"] == "bf16"


def test_plan_goldens_tables_fit_80_columns():
    # every table of every plan golden (the KV table was 81-90 columns wide before)
    from pathlib import Path

    goldens = sorted((Path(__file__).parent / "golden").glob("plan_*.txt"))
    assert goldens
    for path in goldens:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line[:1] in "┏┃┡│└┌":
                assert len(line) <= 80, (path.name, line)
