"""Edges of ``kvcalc/hfconfig/generic.py`` the mutation run (docs/testing.md, 2026-12-08) found
untested: a head width derived from ``hidden_size`` at its smallest values."""

from __future__ import annotations

import pytest

from kvcalc.errors import KvcalcError
from kvcalc.hfconfig import parse_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2,
         "num_attention_heads": 1, "num_key_value_heads": 1, "max_position_embeddings": 4096,
         "vocab_size": 32, "intermediate_size": 8}  # fmt: skip


def test_no_head_dim_and_no_hidden_size_is_refused():
    # without head_dim the width is hidden_size / heads: a hidden_size of 0 gives none to derive
    with pytest.raises(KvcalcError) as refused:
        parse_config(dict(LLAMA, hidden_size=0), name="llama-0")
    assert refused.value.code == "config-missing-key" and "head_dim" in refused.value.message


def test_the_smallest_hidden_size_derives_a_width():
    # hidden_size 1 over one head: heads 1 wide, K and V 2 B each in bf16 -> 4 B per token and layer
    model = parse_config(dict(LLAMA, hidden_size=1), name="llama-1")
    assert {x.k_dim for x in model.layers} == {1} and model.bytes_per_token == 2 * 4
