"""Helpers for tests: bundled configs as fixtures."""

from __future__ import annotations

from kvcalc.hfconfig import parse_config
from kvcalc.sources.bundled import find_bundled


def bundled_shape(reference: str):
    """A bundled model's ModelShape, parsed from its real config.json."""
    bundled = find_bundled(reference)
    assert bundled is not None, reference
    return parse_config(bundled.load(), name=bundled.hf_id)


def bundled_config(reference: str) -> dict:
    bundled = find_bundled(reference)
    assert bundled is not None, reference
    return bundled.load()


def assert_clean(result, *, json_output: bool = False) -> None:
    """The contract for any input: a result (exit 0 or 1, something on stdout, finite numbers in
    JSON), or exactly one ``error[code]`` line plus its hint with exit 2. Never a traceback, never
    ``error[internal]``."""
    import json
    import math

    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert all(len(line) < 2000 for line in result.stderr.splitlines()), "a message of a megabyte"
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        errors = [line for line in lines if line.startswith("error[")]
        assert len(errors) == 1 and "error[internal]" not in errors[0], result.stderr
        assert lines[-2] == errors[0] and lines[-1].startswith("hint: "), result.stderr
        return
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    assert result.stdout, result.stderr
    if json_output:

        def refuse(name: str):
            raise AssertionError(f"JSON output holds {name}")

        data = json.loads(result.stdout, parse_constant=refuse)
        stack = [data]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, float):
                assert math.isfinite(value), value


def fixture_config(name: str) -> dict:
    """A published config kept as test data (``tests/fixtures/configs/<org>--<name>.json``)."""
    import json
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "configs" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def fixture_shape(name: str):
    return parse_config(fixture_config(name), name=name)


def deepseek_v2_lite_shape():
    """DeepSeek-V2-Lite's published config (``tests/fixtures/deepseek-v2-lite/``, a model folder)."""
    import json
    from pathlib import Path

    path = Path(__file__).parent / "fixtures" / "deepseek-v2-lite" / "config.json"
    return parse_config(
        json.loads(path.read_text(encoding="utf-8")), name="deepseek-ai/DeepSeek-V2-Lite"
    )


#: the GPUs the vLLM reference harness emulates, as the engine request names them
HARNESS_GPUS = {
    "h100": {"gpu_memory_bytes": 80 * (1 << 30), "gpu_name": "NVIDIA H100 80GB HBM3",
             "gpu_compute_capability": (9, 0)},
    "b200": {"gpu_memory_bytes": 180 * 10**9, "gpu_name": "NVIDIA B200",
             "gpu_compute_capability": (10, 0)},
    "a100": {"gpu_memory_bytes": 80 * (1 << 30), "gpu_name": "NVIDIA A100-SXM4-80GB",
             "gpu_compute_capability": (8, 0)},
    "l40s": {"gpu_memory_bytes": 48 * (1 << 30), "gpu_name": "NVIDIA L40S",
             "gpu_compute_capability": (8, 9)},
    "rtx5090": {"gpu_memory_bytes": 32 * 10**9, "gpu_name": "NVIDIA GeForce RTX 5090",
                "gpu_compute_capability": (12, 0)},
}  # fmt: skip


def harness_cases(data: dict) -> list:
    """One ``pytest.param(name, row)`` per recorded scenario of a vLLM harness fixture."""
    import pytest

    return [
        pytest.param(
            name,
            row,
            id=f"{name[:-5]}-{row.get('gpu', 'h100')}-{row['kv_cache_dtype']}"
            f"-tp{row['tensor_parallel_size']}-{row['max_model_len']}",
        )  # fmt: skip
        for name, model in data["models"].items()
        for row in model["scenarios"]
    ]


def harness_plan(data: dict, name: str, row: dict):
    """kvcalc's vLLM engine on one recorded scenario (its config, length, dtype, TP, budget, GPU)."""
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest

    model = parse_config(data["models"][name]["config"], name=name)
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=row["max_model_len"], kv_cache_dtype=row["kv_cache_dtype"],
            tensor_parallel_size=row["tensor_parallel_size"],
            available_kv_bytes=row["available_kv_bytes"], **HARNESS_GPUS[row.get("gpu", "h100")],
        )
    )  # fmt: skip


def refusal_class(plan, codes) -> str:
    """The class of kvcalc's refusal of a scenario the engine refused: ``codes[error code]`` where
    ``plan()`` raises, ``"max-model-len"`` where its plan carries vLLM's length refusal, else
    ``"kv-memory"`` — and a plan that sizes and starts (the engine refused it) fails the test."""
    from kvcalc.errors import KvcalcError

    try:
        p = plan()
    except KvcalcError as refused:
        assert refused.code in codes, f"{refused.code}: {refused.message}"
        return str(codes[refused.code])
    if p.refusal:
        assert p.refusal.startswith("User-specified max_model_len"), p.refusal
        return "max-model-len"
    assert not p.fits, "kvcalc sizes and starts a scenario vLLM refuses"
    return "kv-memory"


def config_folder(config: dict, prefix: str = "kvcalc-config-") -> str:
    """A new folder holding ``config`` as its ``config.json`` (a config recorded in a fixture)."""
    import json
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def assert_sized(plan, row: dict) -> None:
    """A plan equals a recorded harness row: block size, blocks, tokens, and the concurrency to
    the two decimals vLLM prints."""
    import pytest

    assert (plan.block_size, plan.num_blocks, plan.kv_cache_tokens) == (
        row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
    )  # fmt: skip
    assert plan.max_concurrency == pytest.approx(row["max_concurrency"], abs=0.005)


#: vLLM's spec kinds (``representative_spec.kind``) as kvcalc's group kind values
VLLM_SPEC_KINDS = {"full_attention": "full", "sliding_window": "sliding", "mla_attention": "mla",
                   "mamba": "recurrent", "cross_attention": "cross",
                   "chunked_local_attention": "chunked"}  # fmt: skip


def assert_matches_row(plan, row: dict) -> None:
    """A plan equals a recorded harness row: :func:`assert_sized`, every group (kind, real layers,
    page, block, blocks per request) and vLLM's capacity line."""
    assert_sized(plan, row)
    got = sorted((g.kind.value, g.num_layers - g.padding_layers, g.page_bytes, g.block_size,
                  g.blocks_per_request) for g in plan.groups)  # fmt: skip
    want = sorted((VLLM_SPEC_KINDS[k], n, page, block, blocks)
                  for k, n, page, block, blocks, _ in row["groups"])  # fmt: skip
    assert got == want
    assert row["log_line"] in plan.log_lines


def refused_for_vllms_reason(plan, row: dict, reasons: dict, codes: dict) -> None:
    """A scenario vLLM refused is refused by kvcalc for the same class of reason: vLLM's error text
    is mapped by ``reasons`` (marker → class; exactly one must match), kvcalc's by ``codes``."""
    classes = {c for marker, c in reasons.items() if marker in row["error"]}
    assert len(classes) == 1, f"vLLM's refusal maps to no single reason class: {row['error']}"
    assert refusal_class(plan, codes) == classes.pop(), row["error"]


def matches_vllm(plan, row: dict, reasons: dict, codes: dict) -> None:
    """``plan()`` does what vLLM did in ``row``: sized as it (:func:`assert_matches_row`), or
    refused for its reason (:func:`refused_for_vllms_reason`)."""
    if "error" in row:
        refused_for_vllms_reason(plan, row, reasons, codes)
    else:
        assert_matches_row(plan(), row)


#: the torch dtype vLLM allocates each kvcalc cache dtype as (fp8 caches are uint8 tensors:
#: vllm/utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE)
VLLM_STORAGE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "uint8",
                "fp8_e4m3": "uint8", "fp8_e5m2": "uint8", "fp8_ds_mla": "uint8"}  # fmt: skip


def vllm_cache_dtypes(layers, kv_cache_dtype: str) -> list[str]:
    """The torch dtypes of vLLM's attention caches: the KV dtype, plus the indexer's fp8 keys
    (uint8) of sparse MLA and DeepSeek-V4's float32 compressor state."""
    from kvcalc.model.attention_layouts import CompressedSparseAttention, SparseMLA

    want = {VLLM_STORAGE[kv_cache_dtype]}
    if any(isinstance(x, (SparseMLA, CompressedSparseAttention)) for x in layers):
        want.add("uint8")
    if any(isinstance(x, CompressedSparseAttention) for x in layers):
        want.add("float32")
    return sorted(want)
