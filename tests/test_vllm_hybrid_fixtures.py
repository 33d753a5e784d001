"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of the recurrent / linear-attention hybrids.

``fixtures/vllm_0_33/hybrid_families.json`` was recorded with the vLLM reference harness (vLLM's
``create_engine_config``, model construction on the meta device, spec collection, grouping and
capacity code; an emulated H100) over auto/fp8 × TP 1/8 × 4,096/32,768 tokens × 20 GiB per GPU, plus a B200 pass.
Each model carries its config and where that config came from. Block size, blocks and tokens must
be equal, concurrency within 0.005, the groups equal, and every refusal refused with vLLM's reason.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import harness_cases, harness_plan

from kvcalc.errors import ConfigError, InputError

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "hybrid_families.json"
DATA = json.loads(FIXTURE.read_text())
KINDS = {"mamba": "recurrent", "full_attention": "full", "mla_attention": "mla"}
CASES = harness_cases(DATA)


def _plan(name: str, row: dict):
    return harness_plan(DATA, name, row)


def test_every_family_is_recorded():
    types = {m["config"]["model_type"] for m in DATA["models"].values()}
    assert types == {
        "jamba", "kimi_linear", "bamba", "falcon_h1", "lfm2", "lfm2_moe", "granitemoehybrid",
        "minimax", "qwen3_next", "qwen3_5_moe", "nemotron_h",
    }  # fmt: skip
    assert all(m["source"] for m in DATA["models"].values())


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if "error" in row:
        with pytest.raises((InputError, ConfigError)) as refused:
            _plan(name, row)
        if isinstance(refused.value, InputError):  # the engine refuses with vLLM's own text
            assert refused.value.code == "unsupported-model"
            assert refused.value.message == f"vLLM 0.33 refuses to start: {row['error']}"
        else:  # MiniMax-01's lightning attention: refused by name when the config is read
            assert refused.value.code == "config-unsupported"
            assert "model_type 'minimax'" in refused.value.message
        return
    p = _plan(name, row)
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (
        row["block_size"], row["num_blocks"], row["kv_cache_tokens"],
    )  # fmt: skip
    assert abs(p.max_concurrency - row["max_concurrency"]) <= 0.005
    # vLLM's group sizes count real layers; kvcalc's num_layers includes the padding layers
    got = Counter(
        (g.kind, g.num_layers - g.padding_layers, g.page_bytes, g.blocks_per_request)
        for g in p.groups
    )
    want = Counter((KINDS[k], n, page, blocks) for k, n, page, blocks in row["groups"])
    assert got == want
