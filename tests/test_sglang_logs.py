"""The SGLang records of ``fixtures/engine_logs.yaml``: what SGLang printed, reproduced.

Each record gives printed figures (GiB to two decimals, token counts exactly). The default
``mem_fraction_static`` of each is checked against the profile's rule, the budget SGLang's formula
gives for the printed free memory (a range: every printed GiB covers ±0.005) must hold the
printed token count, and at that count kvcalc prints SGLang's lines (without the log prefix).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.engines.sglang.defaults import memory_defaults
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB, MIB

HERE = Path(__file__).parent / "fixtures"
RECORDS = {r["id"]: r for r in yaml.safe_load((HERE / "engine_logs.yaml").read_text())}
CONFIGS = json.loads((HERE / "vllm_0_33" / "reference_configs.json").read_text())["models"]
SGLANG = get_engine("sglang")


def tail(line: str, marker: str) -> str:
    return line[line.index(marker) :]


def qwen2(layers: int, heads: int, kv_heads: int, hidden: int, name: str):
    """A Qwen2 config (head_dim = hidden / heads), 131,072 positions as the logs' context_len."""
    return parse_config({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "torch_dtype": "bfloat16",
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "hidden_size": hidden, "intermediate_size": 4 * hidden, "vocab_size": 152064,
        "max_position_embeddings": 131072,
    }, name=name)  # fmt: skip


def token_range(model, tp: int, fraction: float, before_gib: float, after_gib: float, version: str):
    """The tokens SGLang's rest formula gives over the printed free memory's rounding range."""
    found = []
    for before in (before_gib - 0.005, before_gib + 0.005):
        for after in (after_gib - 0.005, after_gib + 0.005):
            rest = SGLANG.available_kv_bytes(MemoryInputs(
                gpu_memory_bytes=math.floor(before * GIB), gpu_memory_utilization=fraction,
                weights_bytes=math.floor(before * GIB) - math.floor(after * GIB),
                engine_version=version, tensor_parallel_size=tp,
            ))  # fmt: skip
            found.append(plan(model, tp, rest, version).kv_cache_tokens)
    return min(found), max(found)


def plan(model, tp: int, rest: int, version: str, **kw):
    return SGLANG.plan_kv_cache(EngineRequest(
        model=model, max_model_len=kw.pop("max_model_len", 131072), tensor_parallel_size=tp,
        available_kv_bytes=rest, engine_version=version, **kw,
    ))  # fmt: skip


def test_qwq_32b_on_four_l4_sglang_0_4_3():
    record = RECORDS["repofile-sglang-qwq-32b-4xl4-tp4-mfs085"]
    f = record["figures"]
    model = qwen2(64, 40, 8, 5120, "Qwen/QwQ-32B")
    l4 = 22_491 * MIB
    # 0.4.x: by TP alone, 0.85 at TP 4; under 25,000 MB: chunked prefill 2,048, graphs up to 80
    assert (
        SGLANG.default_gpu_memory_utilization(
            MemoryInputs(engine_version="2025.03", gpu_memory_bytes=l4, tensor_parallel_size=4)
        )
        == record["mem_fraction_static"]
        == 0.85
    )
    defaults = memory_defaults("2025.03", l4, 4)
    assert (defaults.chunked_prefill_size, defaults.decode_graph_max_bs) == (2048, 80)
    # rest = 6.09 − 21.63 · 0.15 = 2.85 GiB (± the rounding) over 2 KV heads per rank:
    # 64 · 2 · 2 · 128 · 2 B = 65,536 B per token
    low, high = token_range(model, 4, 0.85, f["avail_mem_before_weights_gb"],
                            f["avail_mem_after_weights_gb"], "2025.03")  # fmt: skip
    assert low <= f["max_total_num_tokens"] == 46_611 <= high
    p = plan(model, 4, 46_611 * 65_536, "2025.03", gpu_memory_bytes=l4)
    # K = (46,611 + 1) · 64 · 2 · 128 · 2 B = 1.42 GiB; 0.4.x: min(46,611 // 2, 2,048 + 1) = 2,049
    assert p.log_lines == (
        tail(record["log_lines"][2], "KV Cache"),
        tail(record["log_lines"][5], "max_total_num_tokens"),
    )


def test_r1_distill_qwen_7b_on_a_3090_sglang_feb_2025():
    record = RECORDS["repofile-sglang-r1-distill-qwen-7b-3090-mfs088"]
    f = record["figures"]
    model = qwen2(28, 28, 4, 3584, "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B")
    rtx3090 = 24_576 * MIB
    assert (
        SGLANG.default_gpu_memory_utilization(
            MemoryInputs(engine_version="2025.02", gpu_memory_bytes=rtx3090)
        )
        == 0.88
    )
    defaults = memory_defaults("2025.02", rtx3090, 1)
    assert (defaults.chunked_prefill_size, defaults.decode_graph_max_bs) == (2048, 8)
    # rest = 8.37 − 22.76 · 0.12 = 5.64 GiB over 28 · 4 · 2 · 128 · 2 B = 57,344 B per token
    low, high = token_range(model, 1, 0.88, f["avail_mem_before_weights_gb"],
                            f["avail_mem_after_weights_gb"], "2025.02")  # fmt: skip
    assert low <= f["max_total_num_tokens"] == 105_531 <= high
    p = plan(model, 1, 105_531 * 57_344, "2025.02", gpu_memory_bytes=rtx3090)
    # the February 2025 line has no "#tokens" and ends with a period
    assert p.log_lines == (
        tail(record["log_lines"][2], "KV Cache"),
        tail(record["log_lines"][4], "max_total_num_tokens"),
    )


@pytest.mark.parametrize("version", ["2025.03", "latest"])
def test_gemma3_4b_sglang_march_2025(version):
    record = RECORDS["sglang-4826-gemma3-4b-it-tp1"]
    model = parse_config({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
        "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 34, "num_attention_heads": 8,
                        "num_key_value_heads": 4, "head_dim": 256, "hidden_size": 2560, "sliding_window": 1024,
                        "sliding_window_pattern": 6, "max_position_embeddings": 131072},
    }, name="google/gemma-3-4b-it")  # fmt: skip
    fraction = SGLANG.default_gpu_memory_utilization(MemoryInputs(engine_version="2025.03"))
    assert fraction == record["mem_fraction_static"]
    # Gemma 3 is not a hybrid-SWA architecture in SGLang (and is served text-only by default):
    # every layer for every token. cell = 4 · (256 + 256) · 34 · 2 B = 139,264 B
    cell = 139_264
    for rest in (834_615 * cell, 834_616 * cell - 1):
        p = plan(model, 1, rest, version)
        assert p.kv_cache_tokens == record["figures"]["kv_tokens"] == 834_615
    # K = (834,615 + 1) · 34 · 4 · 256 · 2 B = 54.12 GiB, printed "GB"
    if version == "2025.03":
        assert p.log_lines[0] == tail(record["log_lines"][1], "KV Cache")
    else:
        assert p.log_lines[0] == tail(record["log_lines"][1], "KV Cache").replace(
            "allocated. ", "allocated. dtype: torch.bfloat16, "
        )
    # the rest itself (108.25 GiB) does not follow from the printed "avail mem=131.08 GB" with
    # 0.88: the record prints no free memory before the weights; not asserted.


def test_kimi_k25_on_mi355x_sglang_0_5_8():
    record = RECORDS["repofile-sglang-kimi-k25-8xmi355x-tp8"]
    m = CONFIGS["moonshotai--Kimi-K2.5.json"]
    model = parse_config(m["config"], name="moonshotai/Kimi-K2.5")
    # MI355X, 288 GiB, TP 8: 512 + 16,384 · 1.5 + 1,024 + 512 · 2 = 27,136 MiB, no prefill-graph
    # reserve in 0.5.8 → 0.908; the vision tower (27 layers of 1,152) × 0.95 · 0.957617
    got = SGLANG.default_gpu_memory_utilization(MemoryInputs(
        engine_version="0.5.8", gpu_memory_bytes=288 * GIB, tensor_parallel_size=8, model=model
    ))  # fmt: skip
    assert got == pytest.approx(0.8260405859375, abs=1e-12)
    assert record["mem_fraction_static"].startswith("0.8260405859375")
    # at the printed count the printed line: (2,454,421 + 1) · 61 · 576 · 2 B = 160.63 GiB
    cell = 70_272
    p = plan(model, 8, 2_454_421 * cell + 100 * MIB, "0.5.8", max_model_len=262_144)
    assert p.kv_cache_tokens == record["figures"]["kv_tokens"]
    assert p.log_lines[0] == tail(record["log_lines"][3], "KV Cache")
    # Not reproduced: the budget. 209.98 − 283.56 · (1 − 0.82604) leaves 160.65 GiB; less the
    # 100 MiB multimodal reservation of 0.5.23, 160.55; the pool took 160.63 (about 20 MiB less
    # than without the reservation), on ROCm. Whether 0.5.8 reserved for multimodal is unconfirmed.
