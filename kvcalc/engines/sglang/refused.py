"""What kvcalc refuses under SGLang, by name, rather than guess.

- DeepSeek-V4 (``DeepseekV4ForCausalLM``): SGLang 0.5.23 sizes it with its own
  ``DSV4PoolConfigurator`` (compressed C4/C128 pools and their state pools, a sliding-window ring,
  ``swa_full_tokens_ratio`` 0.1, page 256, ``max_running_requests`` 256 by default) — recorded
  (DeepSeek-V4-Flash: 2,647,040 full tokens at 20 GiB) but not modelled here.
- Mamba hybrids SGLang has no model class for, KV-shared layers other than Gemma-3n's:
  :mod:`~kvcalc.engines.sglang.mamba`, :mod:`~kvcalc.engines.sglang.layers`.
- Speculative decoding on hybrid, sliding-window and DSA targets, DFLASH/DSPARK/UNO/FROZEN_KV_MTP,
  EAGLE-1 heads (:mod:`~kvcalc.engines.sglang.speculative`); DP attention on hybrids and without
  ``--weights-memory`` (:mod:`~kvcalc.engines.sglang.parallel`); DCP beside MHA, DSA, hybrids and
  the rest (:mod:`~kvcalc.engines.sglang.dcp`); HiCache beside hybrids, DSA, speculation, DP attention, PP or DCP
  (:mod:`~kvcalc.engines.sglang.hicache`); LoRA is modelled for dense Llama/Qwen3 and the
  rest refused by name (:mod:`~kvcalc.engines.sglang.lora`; ``--lora-paths`` is
  ``flag-not-modelled``).

- MiMo (``model_type: mimo``, ``MiMoForCausalLM``): its config class is remote code
  (``auto_map``), which the offline SGLang 0.5.23 reference run cannot load, so SGLang's figure for
  it was never recorded; kvcalc does not offer an unchecked one.

Gemma 4 (28,984 tokens vs 29,127) and Kimi-K2.5 (304,103 vs 305,595), refused until the
multimodal reservation was found (:mod:`~kvcalc.engines.sglang.multimodal`), now match.
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.model.attention_layouts import CompressedSparseAttention
from kvcalc.model.shape import ModelShape

#: model types whose SGLang sizing could not be recorded (remote-code configs), with the reason
NOT_RECORDED = {
    "mimo": "its config class is remote code (auto_map), which the offline SGLang 0.5.23 "
    "reference run cannot load, so SGLang's pool for it is not checked",
}


def refuse_unverified(model: ModelShape) -> None:
    """Refuse what SGLang's recorded sizing shows kvcalc does not reproduce, or never recorded."""
    reason = NOT_RECORDED.get(model.model_type)
    if reason is not None:
        raise InputError(
            f"sglang: {model.model_type} is not verified against SGLang: {reason}",
            hint="plan it with --engine vllm, whose sizing of this model is checked",
            code="unsupported-model",
        )
    if any(isinstance(x, CompressedSparseAttention) for x in model.layers):
        raise InputError(
            f"sglang: DeepSeek-V4 compressed sparse attention ({model.model_type}) is sized by "
            "SGLang 0.5.23's DSV4PoolConfigurator (compressed C4/C128 and state pools, a "
            "sliding-window ring, page 256), which kvcalc does not model",
            hint="plan it with --engine vllm, whose sizing of this layout is checked",
            code="unsupported-model",
        )
