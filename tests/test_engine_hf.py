"""transformers engine: DynamicCache / StaticCache bytes, and MLA by transformers version (§4)."""

from __future__ import annotations

import pytest
from helpers import bundled_shape
from test_engine_vllm import gemma3_12b_config

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, MemoryInputs
from kvcalc.engines.hf.setup import installed_transformers_version
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.units import GIB

HF = get_engine("hf")


def plan(model, max_model_len=8192, **kw):
    kw.setdefault("available_kv_bytes", 40 * GIB)
    return HF.plan_kv_cache(EngineRequest(model=model, max_model_len=max_model_len, **kw))


@pytest.fixture(scope="module")
def gemma():
    return parse_config(gemma3_12b_config(), name="gemma")


def test_llama_dynamic_and_static_agree():
    model = bundled_shape("llama-3.1-8b")
    for cache in ("dynamic", "static"):
        p = plan(model, extra={"cache_implementation": cache})
        assert p.bytes_per_request == 8192 * 131_072 == GIB  # 1 GiB at 8,192 tokens


def test_gemma_sliding_layers(gemma):
    # 8 full layers · 32,768 tokens · 8,192 B = 2,147,483,648 B, plus 40 sliding layers of 8,192 B:
    dynamic = plan(gemma, 32768)  # DynamicSlidingWindowLayer keeps window − 1 = 1,023 tokens
    assert dynamic.bytes_per_request == 2_147_483_648 + 40 * 1023 * 8192
    static = plan(gemma, 32768, extra={"cache_implementation": "static"})  # min(1,024, L)
    assert static.bytes_per_request == 2_147_483_648 + 40 * 1024 * 8192
    bare = plan(gemma, 32768, extra={"dynamic_cache_with_config": False})  # no config: full history
    assert bare.bytes_per_request == 48 * 32768 * 8192


def test_deepseek_mla_by_version():
    model = bundled_shape("deepseek-v3")
    old = plan(model, engine_version="4.57.1")
    # 128 heads · (K 128 + 64 and V 128) · 2 B = 81,920 B per layer; 61 layers = 4,997,120 B
    assert old.kv_bytes_per_token == 4_997_120 and old.engine_version == "4"
    new = plan(model, engine_version="5.0.0")
    assert new.kv_bytes_per_token == 70_272 and new.engine_version == "5"  # the 576-wide latent


def test_default_version_is_the_installed_one():
    installed = installed_transformers_version()
    p = plan(bundled_shape("llama-3.1-8b"))
    assert p.notes[0].startswith(f"transformers {installed} (installed)")


def test_batch_fit_and_estimate():
    model = bundled_shape("llama-3.1-8b")
    p = plan(model, 32768, available_kv_bytes=10 * GIB, extra={"batch_size": 4})
    # 4 sequences · 32,768 tokens · 131,072 B = 16 GiB > 10 GiB; 4 · L · 131,072 ≤ 10 GiB → L ≤ 20,480
    assert p.kv_cache_bytes == 16 * GIB and not p.fits
    assert p.estimated_max_model_len == 20_480
    assert p.max_concurrency == 2.5  # 10 GiB / 4 GiB per sequence


def test_float32_checkpoint_caches_float32():
    from helpers import bundled_config

    fp32 = parse_config({**bundled_config("llama-3.1-8b"), "torch_dtype": "float32"}, name="fp32")
    assert plan(fp32).kv_bytes_per_token == 262_144  # 32·2·8·128·4 B


def test_tensor_parallel_heads():
    assert plan(bundled_shape("llama-3.1-8b"), tensor_parallel_size=2).kv_bytes_per_token == 65_536


def test_refusals():
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), kv_cache_dtype="nvfp4")  # fp8: QuantizedCache's backend
    assert err.value.code == "unsupported-dtype"
    with pytest.raises(InputError) as err:
        plan(bundled_shape("llama-3.1-8b"), engine_version="3.0")
    assert err.value.code == "unknown-engine-version"


def test_budget_rule():
    assert HF.available_kv_bytes(MemoryInputs(
        gpu_memory_bytes=80 * GIB, weights_bytes=16 * GIB, activation_bytes=2 * GIB, non_torch_bytes=GIB,
    )) == 61 * GIB  # fmt: skip


def test_recurrent_state_as_transformers_keeps_it():
    from helpers import bundled_shape

    from kvcalc.engines.hf.engine import state_tensors

    gdn = bundled_shape("qwen3-next-80b-a3b-thinking").layers[0]
    conv, ssm = state_tensors(gdn, 1)
    # conv: all 4 kernel columns × 8,192 channels × 2 B = 65,536; state 32·128·128 × 4 B (float32)
    assert (conv.shape, conv.nbytes) == ((4, 8192), 65_536)
    assert (ssm.dtype.name, ssm.nbytes) == ("fp32", 2_097_152)
    mamba = bundled_shape("nvidia-nemotron-3-nano-30b-a3b-bf16").layers[0]
    conv, ssm = state_tensors(mamba, 1)
    # conv 4 × 6,144 × 2 B = 49,152; SSM 64·64·128 × 4 B (the config's float32) = 2,097,152
    assert (conv.nbytes, ssm.nbytes) == (49_152, 2_097_152)


def test_activation_is_sized_for_the_whole_prompt(cli):
    """transformers' ``generate()`` has no chunked prefill: the first forward holds every prompt
    token of the batch. 4 sequences of 32,768 tokens: the forward estimate runs 131,072 tokens, not
    vLLM's 2,048-token chunk. Qwen3-1.7B's widest layer is the MLP: 3 · 6,144 + 2 · 2,048 = 22,528
    values per token; ceil(141% × 131,072 × 2 B × 22,528) = 8,326,867,846 B (0.19-era constants).
    """
    data = cli("plan", "qwen3-1.7b", "--engine", "hf", "--gpu", "H100", "--max-model-len", "32768",
               "--batch", "4", "--json").json  # fmt: skip
    assert data["max_num_batched_tokens"] == 4 * 32_768
    assert data["memory"]["activation_bytes"] == 8_326_867_846
