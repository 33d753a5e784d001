"""The ``--max-model-len`` suggestion of a below-target plan: the longest length that holds the
target (``planning/suggest.py`` ``_length_for_concurrency``).

It first tries the length one plan's blocks suggest and keeps it only where the engine's own
arithmetic says it holds the target and one token more does not; otherwise it searches. Both
paths are checked here: a hand-computed full-attention case (the first try), and sliding-window
and hybrid models where the first try is wrong and the search decides.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB


def _length_suggestion(result):
    found = [s for s in result.suggestions if set(s.change) == {"max_model_len"}]
    assert len(found) == 1, [s.text for s in result.suggestions]
    return found[0]


def test_full_attention_length_is_the_blocks_over_the_target():
    # Llama-3.1-8B, 8 GiB of KV: a block is 16 tokens × 32 layers × 2 (K, V) × 8 KV heads × 128 ×
    # 2 B = 2 MiB, so 4,096 blocks; at 32,768 tokens a request takes 2,048 of them (2 requests).
    # 64 requests need ≤ 4,096 // 64 = 64 blocks each: 64 × 16 = 1,024 tokens (1,025 needs 65).
    inputs = PlanInputs(gpu="H100-80GB", kv_cache_memory_bytes=8 * GIB, max_model_len=32768,
                        batch=64)  # fmt: skip
    result = plan_reference("llama-3.1-8b", inputs)
    assert (result.verdict, result.num_blocks, result.max_concurrency) == (
        "below-target",
        4096,
        2.0,
    )
    s = _length_suggestion(result)
    assert (s.max_model_len, s.max_concurrency) == (1024, 64.0)


@pytest.mark.parametrize(
    ("model", "gpu", "kv_gib"),
    [
        ("gemma-3-1b-it", "H100-80GB", 2),  # sliding window 512 on 5 of every 6 layers
        ("gpt-oss-20b", "H100-80GB", 2),  # sliding 128 / full alternating
        ("llama-3.1-8b", "L40S", None),  # a budget from the GPU: the band's pessimistic end
    ],
)
def test_suggested_length_is_the_longest_that_holds_the_target(model, gpu, kv_gib):
    """Self-consistency (the expected value is kvcalc's own re-plan): the suggested length holds
    the target where the verdict is judged (the budget's pessimistic end) and one token more
    does not."""
    inputs = PlanInputs(gpu=gpu, kv_cache_memory_bytes=kv_gib * GIB if kv_gib else None,
                        max_model_len=32768, batch=64)  # fmt: skip
    result = plan_reference(model, inputs)
    assert result.verdict == "below-target"
    length = _length_suggestion(result).max_model_len
    at = plan_reference(model, replace(inputs, max_model_len=length), with_suggestions=False)
    past = plan_reference(model, replace(inputs, max_model_len=length + 1), with_suggestions=False)
    assert at.verdict in ("ok", "tight") and past.verdict == "below-target"
