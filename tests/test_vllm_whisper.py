"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of Whisper, an encoder-decoder model.

``fixtures/vllm_0_33/registry_multimodal_whisper.json`` was recorded with the vLLM reference
harness: vLLM builds two KV-cache groups, the decoder's self-attention (``FullAttentionSpec``) and
its cross-attention over the encoder's output (``CrossAttentionSpec``, sized by the scheduler's
encoder budget, ``max_num_encoder_input_tokens`` = ``max_num_batched_tokens``), for a published
checkpoint's config, ``WhisperConfig()`` and mutants, at the derived length (448; every requested
4,096/32,768 is refused for its length) and at 256/200 tokens, TP 1/2/4/8, on an emulated H100,
A100, L40S and B200, with a given ``max_num_batched_tokens``; an fp8 cache on the A100 is refused
(cross-attention is not FlashInfer's, so TRITON_ATTN serves it, without fp8 before SM 8.9). Its ``weights`` are vLLM's own meta build
through ``deploy_probe.py`` (parameters and buffers of one rank), which kvcalc's weights per rank
must equal to the byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import HARNESS_GPUS, harness_cases, matches_vllm

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import KvcalcError
from kvcalc.estimate.weights import weight_bytes
from kvcalc.hfconfig import parse_config
from kvcalc.model.cross_attention import CrossAttention
from kvcalc.model.layouts import FullAttention, LayerKind

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "registry_multimodal_whisper.json"
DATA = json.loads(FIXTURE.read_text())
CASES = harness_cases(DATA)
GIB = 1 << 30

LENGTH, PARALLELISM, DTYPE = "max-model-len", "parallelism", "kv-dtype"
VLLM_REASONS = {
    "User-specified max_model_len": LENGTH,  # config/model.py _get_and_verify_max_len
    "must be divisible by tensor parallel size": PARALLELISM,  # config/parallel.py: the heads
    # triton_attn.py on the A100: FlashInfer takes no cross-attention, FA2 no fp8 cache
    "FP8 KV cache is not supported by the Triton attention backend": DTYPE,
}
KVCALC_CODES = {"max-model-len-exceeded": LENGTH, "invalid-parallelism": PARALLELISM,
                "unsupported-dtype": DTYPE}  # fmt: skip


def _model(name: str):
    return parse_config(DATA["models"][name]["config"], name=name)


def _plan(name: str, row: dict, **over):
    length = row["max_model_len"] or row["derived_max_model_len"]
    if row["max_model_len"] is None:
        assert _model(name).max_model_len == row["derived_max_model_len"]
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=_model(name), max_model_len=length, kv_cache_dtype=row["kv_cache_dtype"],
            tensor_parallel_size=row["tensor_parallel_size"],
            available_kv_bytes=row["available_kv_bytes"], **HARNESS_GPUS[row["gpu"]],
            **row.get("engine_args", {}), **over,
        )
    )  # fmt: skip


def test_every_refusal_reason_is_classed():
    texts = {r["error"] for _, r in (c.values for c in CASES) if "error" in r}
    classes = [{c for m, c in VLLM_REASONS.items() if m in t} for t in texts]
    assert all(len(c) == 1 for c in classes)
    assert set().union(*classes) == {LENGTH, PARALLELISM, DTYPE}


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    matches_vllm(lambda: _plan(name, row), row, VLLM_REASONS, KVCALC_CODES)


def test_defaults_by_hand():
    # WhisperConfig(): 4 decoder layers of 6 heads × 384 / 6 = 64 wide, bf16: a page of 16 tokens
    # is 16 × 6 × (64 + 64) × 2 B = 24,576 B in each self- and cross-attention layer; the two
    # groups share a block of 4 × 24,576 = 98,304 B: 21,474,836,480 / 98,304 = 218,453 blocks;
    # a request books cdiv(448, 16) = 28 self-attention blocks and cdiv(8,192, 16) = 512
    # cross-attention blocks (the H100's encoder budget): 218,453 / 540 = 404.54
    model = _model("synthetic--whisper-defaults.json")
    assert [type(x) for x in model.layers] == [FullAttention] * 4 + [CrossAttention] * 4
    cross = model.layers[4]
    assert (cross.entry_bytes, cross.encoder_tokens) == (6 * 128 * 2, 1500)
    assert model.bytes_per_token == 4 * 6 * 128 * 2  # the cross layers add nothing per token
    row = next(r for r in DATA["models"]["synthetic--whisper-defaults.json"]["scenarios"]
               if r["gpu"] == "h100" and "engine_args" not in r and r["kv_cache_dtype"] == "auto"
               and r["tensor_parallel_size"] == 1 and "error" not in r)  # fmt: skip
    p = _plan("synthetic--whisper-defaults.json", row)
    assert p.num_blocks == 21_474_836_480 // 98_304 == 218_453
    assert sorted(g.blocks_per_request for g in p.groups) == [28, 512]
    assert p.max_concurrency == pytest.approx(218_453 / 540, abs=0.005)


def test_cross_blocks_follow_the_encoder_budget():
    # recorded: 2,048 tokens on the A100, the L40S (under 70 GiB) and with
    # --max-num-batched-tokens 2048 (128 blocks), 16,384 on the B200 (1,024 blocks);
    # max_source_positions 3,000 changes nothing
    seen = {}
    for model in DATA["models"].values():
        for row in model["scenarios"]:
            if "error" not in row:
                cross = [g for g in row["groups"] if g[0] == "cross_attention"]
                seen.setdefault((row["gpu"], "engine_args" in row), set()).add(cross[0][4])
    assert seen == {("h100", False): {512}, ("h100", True): {128}, ("a100", False): {128},
                    ("l40s", False): {128}, ("b200", False): {1024}}  # fmt: skip


def test_a_request_holds_its_encoder_tokens():
    # vLLM books 512 cross blocks per request for its capacity line, but the scheduler allocates
    # a request cdiv(1,500, 16) = 94: the workload's concurrency counts those
    row = next(r for r in DATA["models"]["synthetic--whisper-defaults.json"]["scenarios"]
               if r["gpu"] == "h100" and r["kv_cache_dtype"] == "auto" and "error" not in r
               and "engine_args" not in r)  # fmt: skip
    p = _plan("synthetic--whisper-defaults.json", row)
    cross = next(g for g in p.groups if g.kind is LayerKind.CROSS)
    assert cross.encoder_tokens == 1500 and cross.blocks_for(100, 448) == 94
    own = next(g for g in p.groups if g.kind is LayerKind.FULL)
    assert own.blocks_for(100, 448) == 7


@pytest.mark.parametrize("name", sorted(DATA["weights"]))
def test_weights_equal_vllms_meta_build(name):
    for rec in DATA["weights"][name]:
        w = weight_bytes(_model(name), tensor_parallel_size=rec["tensor_parallel_size"])
        assert w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu == rec["param_bytes_per_rank"]
        # the attention's four fp32 scales in each decoder layer's self- and cross-attention
        fp32 = rec["by_dtype"]["torch.float32"]
        assert w.buffers_bytes_per_gpu == fp32 == _model(name).weights.num_layers * 2 * 16


@pytest.mark.torch
def test_transformers_counts_the_same_but_k_proj_bias():
    # transformers' WhisperAttention has no k_proj bias; vLLM's fused qkv_proj has one (zeros):
    # d_model values in each encoder and decoder self-attention and each cross-attention
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from kvcalc.estimate.weights import count_parameters

    raw = DATA["models"]["synthetic--whisper-defaults.json"]["config"]
    config = transformers.WhisperConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.WhisperForConditionalGeneration(config)
    theirs = sum(p.numel() for p in model.parameters())
    ours = count_parameters(_model("synthetic--whisper-defaults.json").weights).total
    assert ours - theirs == 384 * (4 + 4 + 4)


def test_what_vllm_refuses_for_an_encoder_decoder():
    row = next(r for r in DATA["models"]["synthetic--whisper-16-heads.json"]["scenarios"]
               if "error" not in r)  # fmt: skip
    with pytest.raises(KvcalcError) as small:  # no chunked prefill: a budget below the length
        _plan("synthetic--whisper-16-heads.json", row, max_num_batched_tokens=256)
    assert small.value.code == "invalid-input" and "chunked prefill" in small.value.message
    with pytest.raises(KvcalcError) as pp:
        _plan("synthetic--whisper-16-heads.json", row, pipeline_parallel_size=2)
    assert pp.value.code == "unsupported-model"


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
def test_the_other_engines_refuse_it(engine):
    model = _model("openai--whisper-large-v3.json")
    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(
            EngineRequest(model=model, max_model_len=448, available_kv_bytes=20 * GIB)
        )
    assert refused.value.code == "unsupported-model"


def test_a_cross_attention_layer_checks_its_numbers():
    from kvcalc.model.dtypes import BF16, CACHE_DTYPES

    ok = CrossAttention(dtype=BF16, kv_heads=0, head_dim=64, encoder_tokens=0)  # nothing cached
    assert (ok.state_bytes, ok.has_cache) == (0, False)
    for bad in ({"kv_heads": -1}, {"head_dim": True}, {"encoder_tokens": 1.5}):
        with pytest.raises(KvcalcError):
            CrossAttention(**{"dtype": BF16, "kv_heads": 4, "head_dim": 64, "encoder_tokens": 10,
                              **bad})  # fmt: skip
    with pytest.raises(KvcalcError) as mla_only:
        CrossAttention(dtype=CACHE_DTYPES["fp8_ds_mla"], kv_heads=4, head_dim=64,
                       encoder_tokens=10)  # fmt: skip
    assert mla_only.value.code == "unsupported-dtype"
    # per rank as vLLM's attention splits heads: max(1, total // tp), replicated below one head
    layer = CrossAttention(dtype=BF16, kv_heads=4, head_dim=64, encoder_tokens=1500)
    assert [layer.per_rank(tp).kv_heads for tp in (1, 2, 8)] == [4, 2, 1]
    # 4 heads × (64 + 64) × 2 B = 1,024 B per encoder token, 1,500 tokens: 1,536,000 B
    assert (layer.entry_bytes, layer.state_bytes, layer.bytes_per_token) == (1024, 1_536_000, 0)


def test_heads_that_do_not_divide_d_model_are_refused():
    # whisper.py's WhisperAttention raises "embed_dim must be divisible by num_heads"
    raw = dict(DATA["models"]["synthetic--whisper-defaults.json"]["config"], d_model=388)
    with pytest.raises(KvcalcError) as refused:
        parse_config(raw, name="whisper-388")
    assert (
        refused.value.code == "config-invalid"
        and "decoder_attention_heads 6" in refused.value.message
    )
