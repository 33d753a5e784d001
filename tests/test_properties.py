"""Invariants (hypothesis): bytes are non-negative ints, monotone, linear for full layers, capped
for windowed ones; mutated configs parse or fail with a KvcalcError, never anything else."""

from __future__ import annotations

import copy

from helpers import bundled_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcalc.errors import KvcalcError
from kvcalc.hfconfig import parse_config
from kvcalc.model.dtypes import CACHE_DTYPES
from kvcalc.model.layouts import ChunkedLocal, FullAttention, MLALatent, SlidingWindow
from kvcalc.sources.bundled import bundled_models

plain_dtypes = st.sampled_from([d for d in CACHE_DTYPES.values() if not d.mla_record_bytes])
dims = st.sampled_from([32, 64, 96, 128, 192, 256])
heads = st.integers(min_value=1, max_value=128)
tokens = st.integers(min_value=0, max_value=10_000_000)


@given(dtype=plain_dtypes, h=heads, dk=dims, dv=dims, n=tokens, m=tokens)
def test_full_attention_is_linear_and_monotone(dtype, h, dk, dv, n, m):
    layer = FullAttention(dtype=dtype, kv_heads=h, k_dim=dk, v_dim=dv)
    a, b = layer.bytes_for(n), layer.bytes_for(m)
    assert isinstance(a, int) and a >= 0
    assert layer.bytes_for(n + m) == a + b  # linear
    assert (a <= b) == (n <= m) or a == b


@given(dtype=plain_dtypes, h=heads, d=dims, w=st.integers(1, 1 << 20), n=tokens)
def test_windows_cap(dtype, h, d, w, n):
    for cls, extra in ((SlidingWindow, {"sliding_window": w}), (ChunkedLocal, {"chunk_size": w})):
        layer = cls(dtype=dtype, kv_heads=h, k_dim=d, v_dim=d, **extra)
        full = FullAttention(dtype=dtype, kv_heads=h, k_dim=d, v_dim=d)
        assert layer.bytes_for(n) == full.bytes_for(min(n, w))
        assert layer.bytes_for(n) <= layer.bytes_for(n + 1) <= layer.bytes_per_token * w


@given(rank=st.integers(1, 4096), rope=st.integers(0, 512), n=tokens, tp=st.integers(1, 64))
def test_mla_is_replicated_across_tp(rank, rope, n, tp):
    layer = MLALatent(dtype=CACHE_DTYPES["bf16"], kv_lora_rank=rank, rope_dim=rope)
    assert layer.per_rank(tp).bytes_for(n) == layer.bytes_for(n) == n * (rank + rope) * 2


@given(h=heads, tp=st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_kv_heads_per_rank_never_below_one(h, tp):
    layer = FullAttention(dtype=CACHE_DTYPES["bf16"], kv_heads=h, k_dim=128, v_dim=128)
    assert layer.per_rank(tp).num_kv_heads == max(1, h // tp)


ALIASES = [m.alias for m in bundled_models()]
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=8), st.lists(st.integers(-3, 3), max_size=5),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)  # fmt: skip


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(alias=st.sampled_from(ALIASES), data=st.data())
def test_mutated_configs_parse_or_fail_cleanly(alias, data):
    raw = copy.deepcopy(bundled_config(alias))
    target = raw.get("text_config", raw)
    keys = sorted(target)
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = data.draw(junk)
    try:
        shape = parse_config(raw, name=alias)
    except KvcalcError as exc:
        assert exc.code and exc.message and "\n" not in exc.message
        return
    for n in (0, 1, 4096):
        value = shape.bytes_for(n)
        assert isinstance(value, int) and value >= 0
    assert shape.bytes_per_token >= 0 and shape.max_model_len >= 1
