"""``engines/vllm/dcp.py``: the survivors of a mutation run (docs/testing.md, "Mutation testing")
killed with vLLM 0.33.0's own checks, quoted where kvcalc quotes them: ``ModelConfig.
verify_with_parallel_config`` (``config/model.py``) for DCP on GQA/MQA, ``VllmConfig``'s block-size
assertion (``config/vllm.py``) for the interleave, ``SlidingWindowSpec.max_memory_usage_bytes``
("DCP not support sliding window."), and the refusals kvcalc makes where it does not model DCP.
"""

from __future__ import annotations

import pytest
from helpers import bundled_config, bundled_shape

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.vllm.engine import VllmEngine
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

GQA_HINT = "change the parallel sizes as vLLM asks"
NOT_MODELLED = "plan it without --decode-context-parallel-size"


def _plan(model: str, **kw):
    kw.setdefault("kv_cache_memory_bytes", 20 * GIB)
    return plan_reference(model, PlanInputs(gpu="H100-80GB", max_model_len=4096, **kw))


def _refused(model: str, **kw) -> InputError:
    with pytest.raises(InputError) as err:
        _plan(model, **kw)
    return err.value


@pytest.mark.parametrize(
    ("model", "tp", "dcp", "reason"),
    [
        # total_num_kv_heads 8: TP 8 is not greater
        ("llama-3.1-8b", 8, 2, "Decode context parallelism for GQA/MQA requires "
         "`--tensor-parallel-size` (8) to be greater than the model's total number of KV heads "
         "(8). Increase `--tensor-parallel-size` or set `--decode-context-parallel-size 1`."),
        # max_dcp_size = 16 // 8 = 2
        ("llama-3.1-8b", 16, 4, "`--decode-context-parallel-size` (4) exceeds the maximum "
         "supported value (2) for `--tensor-parallel-size` (16) and 8 model KV heads."),
        # Qwen2.5-7B: 28 query heads over 4 KV heads, num_q_per_kv = 7, 7 % 2 != 0
        ("qwen2.5-7b", 28, 2, "The model's number of query heads per KV head (7) must be "
         "divisible by `--decode-context-parallel-size` (2) for GQA/MQA."),
    ],
)  # fmt: skip
def test_dcp_on_gqa_is_refused_in_vllms_words(model, tp, dcp, reason):
    err = _refused(model, tensor_parallel_size=tp, decode_context_parallel_size=dcp)
    assert (err.code, err.message, err.hint) == (
        "invalid-parallelism", f"vLLM refuses these settings: {reason}", GQA_HINT
    )  # fmt: skip


@pytest.mark.parametrize("interleave", [3, 32])
def test_an_interleave_that_does_not_divide_the_block_is_refused(interleave):
    # vLLM asserts cp_kv_cache_interleave_size <= block_size and block_size % it == 0
    err = _refused("llama-3.1-8b", tensor_parallel_size=16, decode_context_parallel_size=2,
                   cp_kv_cache_interleave_size=interleave)  # fmt: skip
    assert (err.code, err.message, err.hint) == (
        "invalid-parallelism",
        "vLLM refuses these settings: Block_size(16) should be greater than or equal to and "
        f"divisible by cp_kv_cache_interleave_size ({interleave}).",
        "give --cp-kv-cache-interleave-size a divisor of 16",
    )


def test_an_interleave_of_the_whole_block_is_run():
    # 16 <= 16 and 16 % 16 == 0: vLLM runs it. Llama-3.1-8B TP 16 × DCP 2: a 4,096-token request
    # holds cdiv(cdiv(4,096, 2), 16) = 128 blocks per GPU
    p = _plan("llama-3.1-8b", tensor_parallel_size=16, decode_context_parallel_size=2,
              cp_kv_cache_interleave_size=16)  # fmt: skip
    assert p.groups[0].blocks_per_request == 128
    assert (
        "decode context parallel 2: each request's tokens are sharded over 2 of the TP ranks, so "
        "a request of L tokens holds cdiv(cdiv(L, 2), block) blocks per GPU"
    ) in p.notes


def test_dcp_on_mla_says_the_latent_is_sharded():
    # vLLM 0.33 kv_cache_planning.py _layer_tp_replicas: a DCP-sharded MLA latent is not a
    # replica of the other TP ranks'. cdiv(cdiv(4,096, 8), 64) = 8 blocks per request
    p = _plan("deepseek-v3", tensor_parallel_size=8, decode_context_parallel_size=8)
    assert (
        "decode context parallel 8: each request's tokens are sharded over 8 of the TP ranks (the "
        "MLA latent is no longer replicated over those ranks), so a request of L tokens holds "
        "cdiv(cdiv(L, 8), block) blocks per GPU"
    ) in p.notes


def test_dcp_with_sliding_windows_is_refused_as_vllm_asserts():
    err = _refused("gpt-oss-20b", tensor_parallel_size=16, decode_context_parallel_size=2)
    assert (err.code, err.message, err.hint) == (
        "invalid-parallelism",
        "vLLM refuses -dcp 2 for this model: DCP not support sliding window.",
        NOT_MODELLED,
    )


@pytest.mark.parametrize(
    ("model", "tp", "layers"),
    [
        ("qwen3-next-80b-a3b-thinking", 4, "recurrent layers (GatedDeltaNetState)"),
        ("glm-5", 8, "mla layers (SparseMLA)"),  # DeepSeek sparse attention's indexed latent
    ],
)
def test_dcp_on_layers_kvcalc_does_not_model_is_refused(model, tp, layers):
    err = _refused(model, tensor_parallel_size=tp, decode_context_parallel_size=2)
    assert (err.code, err.message, err.hint) == (
        "unsupported-parallelism",
        f"--decode-context-parallel-size with {layers} is not modelled: kvcalc models DCP for "
        "full attention and MLA",
        NOT_MODELLED,
    )


def test_dcp_on_an_image_prefix_model_is_refused():
    # is_mm_prefix_lm (vLLM's ModelArchConfigConvertor.is_mm_prefix_lm) picks the composite
    # Triton backend, whose DCP support was not confirmed
    config = {**bundled_config("llama-3.1-8b"), "is_mm_prefix_lm": True}
    model = parse_config(config, name="prefix-llama")
    with pytest.raises(InputError) as err:
        VllmEngine().plan_kv_cache(EngineRequest(
            model=model, kv_cache_dtype="auto", max_model_len=4096, available_kv_bytes=20 * GIB,
            tensor_parallel_size=16, decode_context_parallel_size=2))  # fmt: skip
    assert (err.value.code, err.value.message, err.value.hint) == (
        "unsupported-parallelism",
        "--decode-context-parallel-size on an image-prefix model (composite Triton backend): "
        "whether that backend supports DCP is not confirmed",
        NOT_MODELLED,
    )


def test_the_engine_itself_refuses_dcp_on_an_older_release():
    # planning refuses it before (check_parallel_release); the engine, called alone, too
    request = EngineRequest(model=bundled_shape("deepseek-v3"), kv_cache_dtype="auto",
                            max_model_len=4096, available_kv_bytes=20 * GIB, engine_version="0.28",
                            tensor_parallel_size=8, decode_context_parallel_size=8)  # fmt: skip
    with pytest.raises(InputError) as err:
        VllmEngine().plan_kv_cache(request)
    assert (err.value.code, err.value.message, err.value.hint) == (
        "unsupported-parallelism",
        "--decode-context-parallel-size 8: modelled for vLLM 0.33 only",
        "plan it with --engine-version 0.33",
    )


def test_older_releases_name_every_setting_refused():
    err = _refused("llama-3.1-8b", tensor_parallel_size=2, prefill_context_parallel_size=2,
                   decode_context_parallel_size=2, engine_version="0.28")  # fmt: skip
    assert (err.code, err.message, err.hint) == (
        "unsupported-parallelism",
        "--decode-context-parallel-size, --prefill-context-parallel-size: modelled for vLLM 0.33 "
        "only (read in its code), not 0.28",
        "plan it with --engine-version 0.33",
    )


def test_pcp_on_full_attention_finds_no_backend():
    # vLLM 0.33: only MLAAttentionImpl.supports_pcp; recorded refusal l8_tp2_pcp2
    err = _refused("llama-3.1-8b", tensor_parallel_size=2, prefill_context_parallel_size=2)
    assert (err.code, err.message, err.hint) == (
        "invalid-parallelism",
        "vLLM refuses -pcp 2 for this model: no valid attention backend for its full attention "
        "layers (FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION: PCP not supported); only MLA "
        "attention supports prefill context parallelism",
        "drop --prefill-context-parallel-size, or use -dcp / -tp",
    )


def test_pcp_names_each_kind_of_layer_it_finds_no_backend_for():
    # gpt-oss: full and sliding layers, both without a PCP backend
    err = _refused("gpt-oss-20b", tensor_parallel_size=2, prefill_context_parallel_size=2)
    assert "no valid attention backend for its full, sliding attention layers" in err.message
