"""How well kvcalc predicts vLLM's "available KV cache memory" from the GPU, utilization, weights
and overhead alone. Run from the repo root: ``python bench/accuracy.py``.

For every vLLM record of ``tests/fixtures/engine_logs.yaml`` that prints the available KV memory, or
enough to derive it, plus two supplementary public logs listed below, it predicts

    ceil(total · util) − weights − activation − non_torch − cudagraph   (cudagraph only for v0.21+)

with :func:`kvcalc.estimate.weights.weight_bytes` and :func:`kvcalc.estimate.overhead.estimate_overhead`, and prints the
prediction, the engine's figure and the error. Where the record prints the loaded weights, a second
prediction uses them, isolating the overhead estimate's error from the weight estimate's.
The records' unstated settings (usage context, defaults of the day) are written down per record.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml

from kvcalc.estimate.overhead import Overhead, estimate_overhead, vllm_available_kv_bytes
from kvcalc.estimate.weights import weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.model.gpus import GpuSpec, get_gpu
from kvcalc.sources.bundled import find_bundled
from kvcalc.units import GIB

#: the repo's copy of the reference logs first, then the shared reference folder beside the checkout
LOGS = [ROOT / "tests" / "fixtures" / "engine_logs.yaml",
        ROOT.parent / "shared" / "reference" / "engine_logs.yaml"]  # fmt: skip
#: vLLM started subtracting its CUDA-graph estimate by default in v0.21.0 (engine-accounting §1.8)
CUDAGRAPH_SINCE = (0, 21)


@dataclass(frozen=True)
class Case:
    """The inputs a record implies, with the assumptions kvcalc had to make."""

    model: str
    gpu: str
    max_num_batched_tokens: int
    max_num_seqs: int | None = None  # None: vLLM's default for the GPU tier
    tensor_parallel_size: int = 1
    #: config overrides, for a published model whose bundled sibling differs only there
    config_patch: tuple[tuple[str, object], ...] = ()
    assumption: str = ""


#: Per engine_logs id: the model, GPU and scheduler settings behind it.
CASES = {
    "vllm-10517-llama31-8b-3090-29k": Case(
        "llama-3.1-8b",
        "RTX-3090",
        29000,
        max_num_seqs=256,
        assumption="V0 without chunked prefill profiles max_model_len (29,000) tokens, 256 seqs; the "
        "log printed activation 2.99 GiB and non_torch 0.35 GiB",
    ),
    "vllm-17122-llama31-8b-l40s": Case(
        "llama-3.1-8b",
        "L40S",
        2048,
        assumption="util 0.9 (default then); API-server defaults for a <70 GiB GPU (2,048 tokens, "
        "256 seqs); actual KV = 158,656 tokens × 128 KiB (a lower bound within one block)",
    ),
    "vllm-24577-qwen3-0.6b-a100-bf16-4k": Case(
        "qwen3-0.6b",
        "A100-80GB",
        8192,
        assumption="lm_eval uses the LLM class: 8,192 tokens, 256 seqs (A100 tier); util 0.9",
    ),
    "vllm-4454-a6000-meta-llama-3-8b-instruct": Case(
        "llama-3.1-8b",
        "RTX-A6000",
        8192,
        max_num_seqs=256,
        config_patch=(("max_position_embeddings", 8192), ("rope_scaling", None)),
        assumption="Meta-Llama-3-8B = Llama-3.1-8B weights with 8,192 positions; V0 profiles 8,192 "
        "tokens; A6000 total memory approximate; actual = 13,248 blocks × 2 MiB",
    ),
    "vllm-16570-qwen25-vl-72b-4xa100-40g": Case(
        "qwen2.5-72b",
        "A100-40GB",
        2048,
        tensor_parallel_size=4,
        assumption="the text model stands in for Qwen2.5-VL-72B (vision tower and its encoder "
        "profiling not modelled); API-server defaults; actual = the minimum rank (0.04 GiB)",
    ),
    "vllm-27508-gpt-oss-120b-h100-gmu095": Case(
        "gpt-oss-120b",
        "H100-SXM",
        1024,
        assumption="--max-num-batched-tokens 1024; API server on an H100: 1,024 seqs; no "
        "printed weights (vLLM loads these mxfp4 experts padded: 64.4-66.0 GiB, see vllm-23278)",
    ),
}

#: Public vLLM logs not (yet) in engine_logs.yaml, used the same way.
SUPPLEMENTARY = [
    {
        "id": "vllm-pr10511-llama3-8b-h100 (supplementary)",
        "source_url": "https://github.com/vllm-project/vllm/pull/10511",
        "engine_version": "V0 (Dec 2024)",
        "gpu_memory_utilization": 0.9,
        "figures": {"available_kv_cache_memory_gib": 53.29, "model_weights_gib": 14.96},
        "case": Case(
            "llama-3.1-8b",
            "H100-SXM",
            8192,
            max_num_seqs=256,
            config_patch=(("max_position_embeddings", 8192), ("rope_scaling", None)),
            assumption="Meta-Llama-3-8B; V0 profiles 8,192 tokens and 256 seqs; the log printed "
            "activation 1.26 GiB and non_torch 1.79 GiB",
        ),
    },
    {
        "id": "vllm-23278-gpt-oss-120b-h100 (supplementary)",
        "source_url": "https://github.com/vllm-project/vllm/issues/23278",
        "engine_version": "V1 (Aug 2025)",
        "gpu_memory_utilization": 0.9,
        "figures": {"available_kv_cache_memory_gib": -2.14, "model_loading_gib": 65.9651},
        "case": Case(
            "gpt-oss-120b",
            "H100-SXM",
            8192,
            assumption="API-server defaults on an H100 (8,192 tokens, 1,024 seqs); util 0.9",
        ),
    },
]


def actual_available_gib(rec: dict) -> float | None:
    f = rec.get("figures") or {}
    for key in ("available_kv_cache_memory_gib", "kv_cache_size_gib"):
        if f.get(key) is not None:
            return float(f[key])
    if f.get("kv_cache_gib_per_rank"):
        return min(f["kv_cache_gib_per_rank"])
    if rec["id"].startswith("vllm-17122") and f.get("gpu_kv_cache_tokens"):
        return f["gpu_kv_cache_tokens"] * 131072 / GIB
    if rec["id"].startswith("vllm-4454") and f.get("gpu_blocks"):
        return f["gpu_blocks"] * 16 * 131072 / GIB
    return None


def printed_weights_gib(rec: dict) -> float | None:
    f = rec.get("figures") or {}
    for key in ("model_loading_gib", "model_weights_gib", "model_weights_gb"):
        if f.get(key) is not None:
            return float(f[key])  # vLLM's "GB" in these lines is GiB
    return None


def subtracts_cudagraph(rec: dict) -> bool:
    match = re.match(r"^\s*v?(\d+)\.(\d+)", str(rec.get("engine_version") or ""))
    return bool(match) and (int(match[1]), int(match[2])) >= CUDAGRAPH_SINCE


def load_model(case: Case):
    raw = dict(find_bundled(case.model).load())
    for key, value in case.config_patch:
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return parse_config(raw, name=case.model)


@dataclass(frozen=True)
class Prediction:
    gpu: GpuSpec
    weights_gib: float
    overhead: Overhead
    predicted_gib: float
    #: the prediction with the weights the engine printed, when it printed them
    with_printed_weights_gib: float | None


def predict(rec: dict, case: Case) -> Prediction:
    model = load_model(case)
    gpu = get_gpu(case.gpu)
    tp = case.tensor_parallel_size
    w = weight_bytes(model, tensor_parallel_size=tp)
    weights = w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu
    over = estimate_overhead(model, max_num_batched_tokens=case.max_num_batched_tokens,
                             tensor_parallel_size=tp, gpu=gpu, max_num_seqs=case.max_num_seqs)  # fmt: skip
    util = rec.get("gpu_memory_utilization") or 0.9  # vLLM's default before 0.92

    def avail(weights_bytes: int) -> float:
        return vllm_available_kv_bytes(total_memory_bytes=gpu.memory_bytes, gpu_memory_utilization=util,
                                       weights_bytes=weights_bytes, overhead=over,
                                       subtract_cudagraph=subtracts_cudagraph(rec)) / GIB  # fmt: skip

    printed = printed_weights_gib(rec)
    return Prediction(gpu=gpu, weights_gib=weights / GIB, overhead=over, predicted_gib=avail(weights),
                      with_printed_weights_gib=None if printed is None else avail(round(printed * GIB)))  # fmt: skip


def main() -> int:
    path = next((p for p in LOGS if p.exists()), None)
    records = yaml.safe_load(path.read_text()) if path else []
    rows = [(r, CASES[r["id"]]) for r in records if r["id"] in CASES]
    rows += [(s, s["case"]) for s in SUPPLEMENTARY]
    shown = os.path.relpath(path, ROOT) if path else "not found (supplementary records only)"
    print(f"engine logs: {shown}\n")
    head = (
        f"{'record':46} {'GPU':10} {'weights':>8} {'act':>6} {'nontorch':>8} {'predicted':>9} "
        f"{'actual':>7} {'error':>7} {'%GPU':>6} {'w/ printed weights':>19}"
    )
    print(head)
    print("-" * len(head))
    errors, errors_printed = [], []
    for rec, case in rows:
        actual = actual_available_gib(rec)
        if actual is None:
            continue
        p = predict(rec, case)
        err = p.predicted_gib - actual
        errors.append((err, p.gpu.memory_gib))
        extra = ""
        if p.with_printed_weights_gib is not None:
            err2 = p.with_printed_weights_gib - actual
            errors_printed.append(err2)
            extra = f"{p.with_printed_weights_gib:7.2f} ({err2:+.2f})"
        o = p.overhead
        print(f"{rec['id'][:46]:46} {p.gpu.name:10} {p.weights_gib:8.2f} {o.activation_bytes / GIB:6.2f} "
              f"{o.non_torch_bytes / GIB:8.2f} {p.predicted_gib:9.2f} {actual:7.2f} {err:+7.2f} "
              f"{100 * err / p.gpu.memory_gib:+5.1f}% {extra:>19}")  # fmt: skip
        print(f"{'':4}assumed: {case.assumption}")
    if errors:
        abs_gib = [abs(e) for e, _ in errors]
        pct = [abs(e) / m * 100 for e, m in errors]
        print(
            f"\nsummary: {len(errors)} records; |error| mean {sum(abs_gib) / len(abs_gib):.2f} GiB, "
            f"median {sorted(abs_gib)[len(abs_gib) // 2]:.2f} GiB, max {max(abs_gib):.2f} GiB "
            f"({max(pct):.1f}% of GPU memory); with printed weights ({len(errors_printed)} records): "
            f"mean |error| {sum(map(abs, errors_printed)) / max(1, len(errors_printed)):.2f} GiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
