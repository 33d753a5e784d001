"""The layout arithmetic's survivors of a mutation run over ``kvcalc/model/layouts.py``,
``attention_layouts.py`` and ``recurrent_layouts.py`` (docs/testing.md), each pinned to the engine
code it mirrors.

The recurrent states follow vLLM 0.33's ``MambaStateShapeCalculator``
(``model_executor/layers/mamba/mamba_utils.py``): ``mamba2_state_shape`` pads ``n_groups`` by
``extra_groups_for_head_shards`` (0 where TP divides the groups, else ``tp − n_groups``) and
splits ``conv_dim = I + 2·G·N`` and the heads with ``divide``; ``gated_delta_net_state_shape``
splits ``conv_dim = Dk·Hk·2 + Dv·Hv`` and the value heads; ``mamba1_state_shape`` splits ``I``;
``kda_state_shape`` ``3·H·Dh`` and the heads. The tensors are allocated by name ("conv", "ssm":
``verify/layout_vllm.py``, ``inspect``) with integer shapes (``torch.empty``).
"""

from __future__ import annotations

import pytest

from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP8, FP32
from kvcalc.model.layouts import FullAttention, NoCache
from kvcalc.model.recurrent_layouts import (
    GatedDeltaNetState,
    KimiDeltaState,
    Mamba1State,
    Mamba2State,
    ParallelHybrid,
    ShortConvState,
)


def _mamba2(n_groups: int, **kw) -> Mamba2State:
    # Nemotron-3-Nano's mixer: I = 4,096, N = 128, 64 heads of 64, k = 4
    base = dict(dtype=BF16, ssm_dtype=FP32, conv_kernel=4, intermediate_size=4096,
                n_groups=n_groups, state_size=128, num_heads=64, head_dim=64)  # fmt: skip
    return Mamba2State(**{**base, **kw})


def _gdn(**kw) -> GatedDeltaNetState:
    # Qwen3-Next-80B's: 16 key heads, 32 value heads, both 128 wide, k = 4
    base = dict(dtype=BF16, ssm_dtype=BF16, conv_kernel=4, num_k_heads=16, num_v_heads=32,
                head_k_dim=128, head_v_dim=128)  # fmt: skip
    return GatedDeltaNetState(**{**base, **kw})


def _ints(shape: tuple) -> bool:
    return all(type(d) is int for d in shape)


@pytest.mark.parametrize(
    ("n_groups", "tp", "conv"),
    [
        (8, 1, 4096 + 2 * 8 * 128),  # 6,144: TP divides the 8 groups, none added
        (8, 4, 4096 + 2 * 8 * 128),  # 6,144
        (1, 4, 4096 + 2 * 4 * 128),  # 5,120: 1 % 4 ≠ 0, 4 − 1 = 3 groups added → 4
        (2, 4, 4096 + 2 * 4 * 128),  # 5,120: 2 % 4 ≠ 0, 4 − 2 = 2 added → 4
        (3, 2, 4096 + 2 * 2 * 128),  # 4,608: 3 % 2 ≠ 0, 2 − 3 = −1 "added" → 2 (vLLM's formula)
    ],
)
def test_mamba2_splits_conv_channels_with_vllm_s_group_padding(n_groups, tp, conv):
    state = _mamba2(n_groups)
    assert state.tp_split_dims(tp) == {"conv channels": conv, "heads": 64}
    ranked = state.per_rank(tp)
    shapes = [(t.name, t.shape, t.dtype) for t in ranked.state_tensors()]
    assert shapes == [("conv", (3, conv // tp), BF16), ("ssm", (64 // tp, 64, 128), FP32)]
    assert all(_ints(t.shape) for t in ranked.state_tensors())


def test_gated_deltanet_splits_conv_channels_and_value_heads():
    # conv 128·16·2 + 128·32 = 8,192 channels; at TP 8 (3, 1,024) and (4, 128, 128)
    state = _gdn()
    assert state.tp_split_dims(8) == {"conv channels": 8192, "value heads": 32}
    ranked = state.per_rank(8)
    assert [(t.name, t.shape) for t in ranked.state_tensors()] == [
        ("conv", (3, 1024)), ("ssm", (4, 128, 128))
    ]  # fmt: skip
    # one value head per rank: (1, 128, 128), 1 · 128 · 128 · 2 B = 32,768 B
    one = _gdn(num_k_heads=8, num_v_heads=8).per_rank(8)
    assert [t.shape for t in one.state_tensors()][1] == (1, 128, 128)
    assert all(_ints(t.shape) for t in one.state_tensors())
    # unequal key and value widths: 64·4·2 + 96·6 = 1,088 channels (not 64·4·3 + 96·6 = 1,344)
    assert _gdn(num_k_heads=4, num_v_heads=6, head_k_dim=64, head_v_dim=96).tp_split_dims(1) == {
        "conv channels": 1088, "value heads": 6,
    }  # fmt: skip


def test_mamba1_splits_its_channels():
    # Jamba-1.5-Mini: I = 8,192, N = 16, k = 4; TP 2 → conv (3, 4,096) bf16, SSM (4,096, 16)
    state = Mamba1State(dtype=BF16, ssm_dtype=FP32, conv_kernel=4, intermediate_size=8192,
                        state_size=16)  # fmt: skip
    assert state.tp_split_dims(2) == {"channels": 8192}
    ranked = state.per_rank(2)
    assert [(t.name, t.shape, t.dtype) for t in ranked.state_tensors()] == [
        ("conv", (3, 4096), BF16), ("ssm", (4096, 16), FP32)
    ]  # fmt: skip
    assert all(_ints(t.shape) for t in ranked.state_tensors())


def test_short_conv_splits_its_channels():
    # LFM2-2.6B: D = 2,048, L = 3; TP 2 → (2, 1,024)
    state = ShortConvState(dtype=BF16, ssm_dtype=BF16, conv_kernel=3, conv_dim=2048)
    assert state.tp_split_dims(2) == {"conv channels": 2048}
    (conv,) = state.per_rank(2).state_tensors()
    assert (conv.name, conv.shape) == ("conv", (2, 1024)) and _ints(conv.shape)


def test_kda_splits_its_three_convolved_projections_and_heads():
    # Kimi-Linear-48B: H = 32, Dh = 128; conv 3 · 32 · 128 = 12,288 channels (q, k and v)
    state = KimiDeltaState(dtype=BF16, ssm_dtype=FP32, conv_kernel=4, num_heads=32, head_dim=128)
    assert state.tp_split_dims(4) == {"conv channels": 12288, "heads": 32}
    ranked = state.per_rank(4)
    assert [(t.name, t.shape, t.dtype) for t in ranked.state_tensors()] == [
        ("conv", (3, 3072), BF16), ("ssm", (8, 128, 128), FP32)
    ]  # fmt: skip
    assert all(_ints(t.shape) for t in ranked.state_tensors())


def test_a_sequence_without_tokens_holds_no_state():
    # bytes_for(0): nothing allocated; one token: the whole state (Nemotron-3-Nano's 2,134,016 B)
    state = _mamba2(8)
    assert state.bytes_for(0) == 0
    assert state.bytes_for(1) == state.bytes_for(4096) == 36_864 + 2_097_152
    with pytest.raises(InputError) as caught:
        state.bytes_for(-1)
    assert caught.value.message == "token count must be >= 0, got -1"
    assert NoCache(dtype=BF16).tokens_held(4096) == 0  # a layer without a cache keeps no token
    assert state.tokens_held(4096) == 0


def test_a_parallel_hybrid_takes_the_cache_dtype_for_its_attention_only():
    # Falcon-H1: attention K/V in the KV-cache dtype, the Mamba2 mixer's states in their own
    attention = FullAttention(kv_heads=2, k_dim=64, v_dim=64, dtype=BF16)
    hybrid = ParallelHybrid(dtype=BF16, attention=attention, mixer=_mamba2(1))
    fp8 = hybrid.with_dtype(FP8)
    assert isinstance(fp8, ParallelHybrid)
    assert fp8.dtype == FP8 and fp8.attention.dtype == FP8
    assert fp8.bytes_per_token == 2 * (64 + 64) * 1  # 256 B a token in fp8
    assert [t.dtype for t in fp8.state_tensors()] == [BF16, FP32]
    ranked = hybrid.per_rank(2)
    assert isinstance(ranked, ParallelHybrid)
    assert ranked.attention.kv_heads == 1 and ranked.mixer.tp == 2
    assert ranked.tp_split_dims(2) == {"conv channels": 4096 + 2 * 2 * 128, "heads": 64}


@pytest.mark.parametrize("field", ["kv_heads", "k_dim", "v_dim"])
@pytest.mark.parametrize("bad", [-1, True, 1.5, "8"])
def test_a_full_attention_layer_takes_non_negative_ints_only(field, bad):
    good = dict(kv_heads=8, k_dim=128, v_dim=128, dtype=BF16)
    with pytest.raises(InputError) as caught:
        FullAttention(**{**good, field: bad})
    assert caught.value.message == f"full layer: {field} must be a non-negative int"
    FullAttention(**{**good, field: 0})  # zero is allowed (a layer of no heads holds nothing)


def test_the_mla_record_dtype_is_refused_for_plain_attention():
    # fp8_ds_mla packs one 656 B record per token of an MLA latent (vLLM's FlashMLA sparse
    # layout): there is no such record for per-head K/V
    from kvcalc.model.dtypes import FP8_DS_MLA

    with pytest.raises(InputError) as caught:
        FullAttention(kv_heads=8, k_dim=128, v_dim=128, dtype=FP8_DS_MLA)
    assert caught.value.code == "unsupported-dtype"
    assert caught.value.message == "cache dtype fp8_ds_mla applies to MLA models only"
    assert caught.value.hint == "use fp8 for a compact cache on non-MLA models"
