"""``kvcalc verify`` layout check on CPU: every bundled model, engine layout and cache dtype torch can
hold is allocated and its storage bytes must equal kvcalc's prediction exactly.

The whole-matrix test is a **self-consistency check**, not evidence that kvcalc matches an engine:
the tensors allocated are the ones kvcalc's own layouts describe (``verify/layout.py``), so it shows
that the allocation and the byte arithmetic agree with each other, and nothing about whether the
layout is the engine's. The engine comparisons are the recorded fixtures (``test_vllm_reference``,
``test_sglang_reference``, ``verify --run`` in ``test_verify_run``...).

torch tests skip only outside CI: with ``CI=true`` a missing torch fails them (and
:func:`test_torch_is_installed_in_ci`).
"""

from __future__ import annotations

import json

import pytest
from helpers import bundled_shape
from verify_helpers import HAS_TORCH, IN_CI, needs_torch

from kvcalc.errors import KvcalcError, install_hint
from kvcalc.sources.bundled import bundled_models
from kvcalc.verify.layout import allocation_plan
from kvcalc.verify.spec import VerifyOptions

#: models whose vLLM tensors verify does not build yet (it refuses them: tested below)
UNBUILT = {"glm-5": "sparse-attention indexer"}
ALIASES = [m.alias for m in bundled_models() if m.alias not in UNBUILT]
#: every cache dtype each engine accepts (fp8 and quantized formats are raw uint8 bytes)
DTYPES = {
    "vllm": ("auto", "float16", "bfloat16", "fp8", "fp8_e5m2", "fp8_per_token_head", "int8_per_token_head",
             "int4_per_token_head", "nvfp4", "fp8_ds_mla"),
    "hf": ("auto", "fp32", "fp16", "bf16"),
    "llamacpp": ("auto", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"),
    "sglang": ("auto", "fp16", "bf16", "fp8", "fp8_e5m2"),
}  # fmt: skip
RECURRENT = {"qwen3-next-80b-a3b-thinking", "nvidia-nemotron-3-nano-30b-a3b-bf16"}
#: the ``hf`` engine model books vLLM's (kernel − 1) conv state (and a bf16 GDN state); transformers
#: keeps the whole kernel (and float32 for Gated DeltaNet), measured with ``--run`` (test_verify_run)


def layout(alias: str, engine: str = "vllm", dtype: str = "auto", **kw):
    from kvcalc.verify.check import verify_layout

    return verify_layout(bundled_shape(alias), VerifyOptions(engine=engine, kv_cache_dtype=dtype, **kw),
                         device="cpu", touch=False)  # fmt: skip


def test_torch_is_installed_in_ci():
    if IN_CI:
        assert HAS_TORCH, "CI must install torch (the verify extra): verify tests would be skipped"
    elif not HAS_TORCH:
        pytest.skip("torch not installed")


# -- the whole matrix ---------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("alias", ALIASES)
def test_self_consistency_allocations_equal_kvcalcs_own_predictions(alias):
    """All engines × all dtypes the engine accepts for this model: the storage torch allocates for
    kvcalc's own layouts == kvcalc's own prediction (expected value from the code under test)."""
    failed, ran = [], 0
    for engine, dtypes in DTYPES.items():
        for dtype in dtypes:
            try:
                result = layout(alias, engine, dtype)
            except (
                KvcalcError
            ) as exc:  # the engine refuses: a dtype for MLA only, recurrent models...
                assert exc.code in ("unsupported-dtype", "unsupported-model"), (engine, dtype, exc)
                continue
            ran += 1
            exact = result.measured_bytes == result.predicted_bytes and all(
                c.measured_bytes == c.predicted_bytes for c in result.components
            )
            if not (
                result.passed and exact and result.memory.storage_bytes == result.predicted_bytes
            ):
                failed.append((engine, dtype, result.relative_error, result.notes))
    assert ran >= 6, "too few layouts ran"
    assert not failed, failed


@needs_torch
@pytest.mark.parametrize("alias", sorted(RECURRENT))
def test_self_consistency_hf_recurrent_layouts(alias):
    # kvcalc's hf layout of the recurrent state (conv_kernel columns, not kernel − 1; Gated
    # DeltaNet's state in float32) allocates what kvcalc predicts; that it is what transformers
    # keeps is measured by verify --run (tests/test_verify_run.py), not here
    assert layout(alias, "hf").passed


# -- hand-computed layouts ----------------------------------------------------------------------
def shapes(alias, engine="vllm", dtype="auto", **kw):
    plan = allocation_plan(
        bundled_shape(alias), VerifyOptions(engine=engine, kv_cache_dtype=dtype, **kw)
    )
    return plan, {(b.shape, b.torch_dtype) for b in plan.buffers}


def test_vllm_flash_attention_tensor_per_layer():
    plan, found = shapes("llama-3.1-8b")
    # (2, num_blocks, block_size, kv_heads, head_size): 2·4·16·8·128·2 B = 262,144 B per layer
    assert found == {((2, 4, 16, 8, 128), "bfloat16")} and len(plan.buffers) == 32
    assert plan.predicted_bytes == 32 * 262_144
    _, fp8 = shapes("llama-3.1-8b", dtype="fp8")
    assert fp8 == {((2, 4, 16, 8, 128), "uint8")}  # vLLM stores fp8 as uint8
    plan, int8 = shapes(
        "llama-3.1-8b", dtype="int8_per_token_head"
    )  # + one float32 scale per token per head
    assert int8 == {((4 * 16 * 8 * (132 + 132),), "uint8")} and plan.predicted_bytes == 32 * 135_168
    plan, _ = shapes("llama-3.1-8b", dtype="nvfp4")  # per head 128/2 + 128/16 = 72 B per side
    assert plan.predicted_bytes == 32 * 4 * 16 * 8 * 144


def test_vllm_mla_latent():
    plan, found = shapes("deepseek-v3")
    assert found == {((4, 16, 576), "bfloat16")} and plan.predicted_bytes == 61 * 4 * 16 * 576 * 2
    plan, found = shapes("deepseek-v3", dtype="fp8_ds_mla")
    assert found == {
        ((4, 64, 656), "uint8")
    }  # the 656-byte sparse-MLA record, FlashMLA's 64-token blocks


def test_vllm_hybrid_groups_share_tensors():
    plan, found = shapes("gemma-3-1b-it")
    # 22 sliding + 4 full layers: group_size 4 → 6 sliding groups + 1 full group share 4 tensors
    # of 2·16·1·256·2 B × 4 blocks = 65,536 B
    assert found == {((65_536,), "uint8")} and len(plan.buffers) == 4
    assert len(plan.plan["groups"]) == 7 and plan.predicted_bytes == 4 * 65_536
    assert {v.layer for b in plan.buffers for v in b.views} == set(range(26))


def test_vllm_mamba_hybrid_pages_padded():
    plan, _ = shapes("qwen3-next-80b-a3b-thinking")
    # GDN state 1,097,728 B; attention 2·2·256·2 = 2,048 B/token; align mode, 64-token alignment:
    # block 64·cdiv(1,097,728, 64·2,048) = 576, page 576·2,048 = 1,179,648 (mamba padded to it)
    assert plan.block_size == 576 and len(plan.buffers) == 12
    assert plan.predicted_bytes == 12 * 4 * 1_179_648
    parts = {c.name: c.predicted_bytes for c in plan.components}
    assert parts["recurrent padding"] == 36 * 4 * (1_179_648 - 1_097_728)


def test_llamacpp_block_formats_as_raw_bytes():
    plan, found = shapes("llama-3.1-8b", "llamacpp", "q8_0", tokens=64)
    # n_ctx 64 → padded to 256 cells; rows of 8·128 = 1,024 values = 32 blocks of 34 B
    assert found == {((256, 32, 34), "uint8")} and plan.predicted_bytes == 32 * 2 * 256 * 1_088
    plan, found = shapes("deepseek-v3", "llamacpp", "f16")
    assert found == {((256, 576), "float16")} and len(plan.buffers) == 61  # MLA: no V tensor


def test_hf_windows_capped():
    _, found = shapes("gemma-3-1b-it", "hf", tokens=2048)
    assert ((1, 1, 511, 256), "bfloat16") in found  # DynamicSlidingWindowLayer keeps window − 1
    assert ((1, 1, 2048, 256), "bfloat16") in found
    _, found = shapes(
        "gemma-3-1b-it", "hf", tokens=2048, engine_options=(("cache_implementation", "static"),)
    )
    assert ((1, 1, 512, 256), "bfloat16") in found  # StaticSlidingWindowLayer: the window


def test_sglang_token_pool():
    plan, found = shapes("llama-3.1-8b", "sglang", tokens=64)
    assert found == {((65, 8, 128), "bfloat16")} and len(plan.buffers) == 64  # tokens + page_size


@needs_torch
def test_tensor_parallel_rank_share():
    result = layout("llama-3.1-8b", tensor_parallel_size=2)
    assert result.passed and result.predicted_bytes == 32 * 2 * 4 * 16 * 4 * 128 * 2


# -- the command ----------------------------------------------------------------------------------
@needs_torch
def test_cli_json(cli):
    r = cli("verify", "llama-3.1-8b", "--kv-cache-dtype", "fp8", "--num-blocks", "8", "--json")
    assert r.exit_code == 0, r.stderr
    data = r.json
    for key in ("device", "predicted_bytes", "measured_bytes", "relative_error", "components",
                "total_device_memory_bytes", "torch_version", "passed"):  # fmt: skip
        assert key in data
    assert data["device"] == "cpu" and data["passed"] is True
    assert data["predicted_bytes"] == data["measured_bytes"] == 32 * 2 * 8 * 16 * 8 * 128
    assert data["memory"]["storage_bytes"] == data["measured_bytes"]
    assert data["memory"]["rss_delta_bytes"] is not None  # reported, not judged
    assert {c["name"] for c in data["components"]} == {"full K", "full V"}
    assert all(
        set(c) >= {"predicted_bytes", "measured_bytes", "relative_error"}
        for c in data["components"]
    )


@needs_torch
@pytest.mark.parametrize("engine", ["vllm", "hf", "llamacpp", "sglang"])
def test_cli_table(cli, engine):
    r = cli("verify", "gemma-3-1b-it", "--engine", engine)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "Predicted vs measured" in r.stdout and "Verdict: passed" in r.stdout
    assert "sliding K" in r.stdout or engine == "sglang"


@needs_torch
def test_cli_layers_keep_the_pattern(cli):
    r = cli("verify", "gemma-3-1b-it", "--layers", "6", "--json")
    assert r.exit_code == 0, r.stderr
    comps = {c["name"]: c["num_layers"] for c in r.json["components"]}
    assert comps == {"sliding K": 5, "sliding V": 5, "full K": 1, "full V": 1}


@needs_torch
def test_cli_beyond_tolerance_exits_1(cli):
    # DynamicCache's sliding layers keep one token more than the window − 1 view (+0.16 % here)
    r = cli(
        "verify",
        "gemma-3-1b-it",
        "--engine",
        "hf",
        "--run",
        "--layers",
        "6",
        "--tolerance",
        "0.0001",
        "--json",
    )
    assert r.exit_code == 1, r.stderr
    assert r.json["passed"] is False


@needs_torch
def test_cli_fill_needs_cuda(cli):
    from verify_helpers import cuda_available

    if cuda_available():
        pytest.skip("this machine has CUDA")
    r = cli("verify", "llama-3.1-8b", "--fill")
    assert r.exit_code == 2
    assert r.stderr.startswith("error[needs-cuda]: --fill")


def test_cli_run_needs_hf(cli):
    r = cli("verify", "llama-3.1-8b", "--run")
    assert r.exit_code == 2 and "error[run-needs-hf]" in r.stderr


def test_cli_without_torch(cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    r = cli("verify", "llama-3.1-8b")
    assert r.exit_code == 2
    assert r.stderr.startswith("error[torch-missing]:")
    assert install_hint("verify") in " ".join(r.stderr.split())


def test_cli_bad_engine(cli):
    r = cli("verify", "llama-3.1-8b", "--engine", "trtllm")
    assert r.exit_code == 2 and "error[unsupported-engine]" in r.stderr


@needs_torch
def test_cli_record_appends_json_lines(cli, tmp_path):
    path = tmp_path / "cal" / "records.jsonl"
    for _ in range(2):
        assert cli("verify", "qwen3-0.6b", "--record", str(path)).exit_code == 0
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 2
    rec = lines[0]
    assert (
        rec["kind"] == "kvcalc-verify"
        and rec["model"] == "Qwen/Qwen3-0.6B"
        and rec["check"] == "layout"
    )
    assert rec["predicted_bytes"] == rec["measured_bytes"] and rec["date"]
    assert rec["predicted_overhead_bytes"] is None  # only --fill measures overhead


@pytest.mark.parametrize(
    "args", [["verify", "-h"], ["verify", "llama-3.1-8b", "--engine", "trtllm"]]
)
def test_torch_is_imported_only_when_allocating(args):
    from test_startup import imported_heavy

    assert "torch" not in imported_heavy(args)


@needs_torch
@pytest.mark.parametrize("alias", sorted(UNBUILT))
def test_unbuilt_layouts_are_refused(alias):
    with pytest.raises(KvcalcError) as err:
        layout(alias, "vllm", "auto")
    assert err.value.code == "unsupported-model"
