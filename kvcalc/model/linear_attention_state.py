"""Lightning (linear) attention's recurrent state (Bailing MoE V2.5), apart from
:mod:`kvcalc.model.recurrent_layouts` and loaded only by the family that lays it out.

vLLM 0.33 ``model_executor/layers/mamba/linear/base.py`` (``LinearAttention``):
``linear_attention_state_shape`` is ``(num_heads / tp, head_dim, head_dim)``,
``linear_attention_state_dtype`` the ``mamba_cache_dtype`` (``auto``: the model dtype); there is no
conv state.
"""

from __future__ import annotations

from typing import ClassVar

from kvcalc.frozen import frozen
from kvcalc.model.layouts import RecurrentState, RecurrentVariant, StateTensor


@frozen
class LinearAttentionState(RecurrentState):
    """Lightning (linear) attention (``mamba/linear/base.py``): one state ``(H/tp, Dh, Dh)`` in the
    conv-state dtype (``linear_attention_state_dtype``: ``mamba_cache_dtype``), no conv state.

    Bailing MoE V2.5's (H = 32, Dh = 64, bf16): 32 · 64 · 64 · 2 = 262,144 B per sequence per
    layer. Its gated group norm splits ``group_norm_size`` groups over the TP ranks, which must
    divide them (``bailing_linear_attn.py``).
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.LINEAR_ATTENTION
    spec_conv_rows: ClassVar[bool] = False  # no conv state
    num_heads: int
    head_dim: int
    group_norm_size: int = 1

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        return {"heads": self.num_heads, "group_norm_size groups": self.group_norm_size}

    def state_tensors(self) -> tuple[StateTensor, ...]:
        shape = (self.num_heads // self.tp, self.head_dim, self.head_dim)
        return (StateTensor(name="state", shape=shape, dtype=self.dtype),)
