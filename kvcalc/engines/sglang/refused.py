"""What kvcalc refuses under SGLang, by name, rather than guess.

- DeepSeek-V4 (``DeepseekV4ForCausalLM``): SGLang 0.5.23 sizes it with its own
  ``DSV4PoolConfigurator`` (compressed C4/C128 pools and their state pools, a sliding-window ring,
  ``swa_full_tokens_ratio`` 0.1, page 256, ``max_running_requests`` 256 by default) — recorded
  (DeepSeek-V4-Flash: 2,647,040 full tokens at 20 GiB) but not modelled here.
- Mamba hybrids SGLang has no model class for, KV-shared layers other than Gemma-3n's:
  :mod:`~kvcalc.engines.sglang.mamba`, :mod:`~kvcalc.engines.sglang.layers`.

Gemma 4 (28,984 tokens vs 29,127) and Kimi-K2.5 (304,103 vs 305,595), refused until the
multimodal reservation was found (:mod:`~kvcalc.engines.sglang.multimodal`), now match.
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import CompressedSparseAttention
from kvcalc.model.shape import ModelShape


def refuse_unverified(model: ModelShape) -> None:
    """Refuse what SGLang's recorded sizing shows kvcalc does not reproduce."""
    if any(isinstance(x, CompressedSparseAttention) for x in model.layers):
        raise InputError(
            f"sglang: DeepSeek-V4 compressed sparse attention ({model.model_type}) is sized by "
            "SGLang 0.5.23's DSV4PoolConfigurator (compressed C4/C128 and state pools, a "
            "sliding-window ring, page 256), which kvcalc does not model",
            hint="plan it with --engine vllm, whose sizing of this layout is checked",
            code="unsupported-model",
        )
