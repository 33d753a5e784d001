"""The recurrent layers' states: Mamba2, Gated DeltaNet, Mamba1, short convolution, Kimi Delta
Attention, and the parallel attention + Mamba hybrid.

Each layer keeps a constant state per sequence, no per-token cache
(:class:`~kvcalc.model.layouts.RecurrentState` is the base). The state tensors are the ones
vLLM 0.33 allocates (``vllm/model_executor/layers/mamba/mamba_utils.py``,
``MambaStateShapeCalculator``), in its default ``SD`` orientation (``(state_len, dim)`` for the
convolution state), split over tensor-parallel ranks with vLLM's ``divide``:

- Mamba2 (Nemotron-H): conv ``(k − 1, (I + 2·G·N)/tp)``, SSM ``(H/tp, P, N)``;
- Gated DeltaNet (Qwen3-Next): conv ``(k − 1, conv_dim/tp)``, state ``(Hv/tp, Dv, Dk)``;
- Mamba1 (Jamba): conv ``(k − 1, I/tp)``, SSM ``(I/tp, N)``;
- short convolution (LFM2): conv ``(L − 1, D/tp)`` only;
- Kimi Delta Attention (Kimi-Linear): conv ``(k − 1, 3·H·Dh/tp)``, recurrent ``(H/tp, Dh, Dh)``;
- lightning (linear) attention (Bailing MoE V2.5, ``model/linear_attention_state.py``): one state
  ``(H/tp, Dh, Dh)``, no conv state.

The conv state is stored in ``dtype`` (vLLM's ``mamba_cache_dtype``, ``auto`` = the model dtype), the
SSM/recurrent state in ``ssm_dtype`` (``mamba_ssm_cache_dtype``; KDA's ``auto`` is float32).
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import ClassVar

from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import (
    FullAttention,
    Layout,
    RecurrentState,
    RecurrentVariant,
    StateTensor,
)


@frozen
class Mamba2State(RecurrentState):
    """Mamba2 (Nemotron-H): conv ``(k-1, (I + 2·G·N)/tp)`` and SSM ``(H/tp, P, N)``.

    Nemotron-3-Nano: conv (3, 4,096 + 2·8·128 = 6,144) bf16 = 36,864 B;
    SSM (64, 64, 128) fp32 = 2,097,152 B; 2,134,016 B per sequence per layer.
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.MAMBA2
    intermediate_size: int
    n_groups: int
    state_size: int
    num_heads: int
    head_dim: int

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        tp = tensor_parallel_size
        groups = self.n_groups if self.n_groups % tp == 0 else self.n_groups + (tp - self.n_groups)
        conv_dim = self.intermediate_size + 2 * groups * self.state_size
        return {"conv channels": conv_dim, "heads": self.num_heads}

    def state_tensors(self) -> tuple[StateTensor, ...]:
        tp = self.tp
        # vLLM pads n_groups so that groups shard evenly over tp ranks.
        groups = self.n_groups if self.n_groups % tp == 0 else self.n_groups + (tp - self.n_groups)
        conv_dim = (self.intermediate_size + 2 * groups * self.state_size) // tp
        return (
            StateTensor(name="conv", shape=(self.conv_rows, conv_dim), dtype=self.dtype),
            StateTensor(
                name="ssm",
                shape=(max(1, self.num_heads // tp), self.head_dim, self.state_size),
                dtype=self.ssm_dtype,
            ),
        )


@frozen
class GatedDeltaNetState(RecurrentState):
    """Gated DeltaNet linear attention (Qwen3-Next): conv ``(k-1, conv_dim/tp)``, state ``(Hv/tp, Dv, Dk)``.

    Qwen3-Next-80B: conv_dim = 128·16·2 + 128·32 = 8,192; conv (3, 8,192) bf16 = 49,152 B;
    state (32, 128, 128) bf16 = 1,048,576 B; 1,097,728 B per sequence per layer.
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.GATED_DELTANET
    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    #: the layer can export prefill checkpoints with the FlashInfer prefill kernel (Qwen3-Next's
    #: ``qwen_gdn_linear_attn.py``); OLMo-Hybrid's ``olmo_gdn_linear_attn.py`` never does
    prefill_checkpoints: bool = True

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        conv_dim = self.head_k_dim * self.num_k_heads * 2 + self.head_v_dim * self.num_v_heads
        return {"conv channels": conv_dim, "value heads": self.num_v_heads}

    def state_tensors(self) -> tuple[StateTensor, ...]:
        tp = self.tp
        conv_dim = self.head_k_dim * self.num_k_heads * 2 + self.head_v_dim * self.num_v_heads
        return (
            StateTensor(name="conv", shape=(self.conv_rows, conv_dim // tp), dtype=self.dtype),
            StateTensor(
                name="ssm",
                shape=(max(1, self.num_v_heads // tp), self.head_v_dim, self.head_k_dim),
                dtype=self.ssm_dtype,
            ),
        )


@frozen
class Mamba1State(RecurrentState):
    """Mamba (v1) mixer: conv ``(k − 1, I/tp)``, SSM ``(I/tp, N)``.

    Jamba-1.5-Mini (I = 2 · 4,096 = 8,192, N = 16, k = 4, bf16): conv 3 · 8,192 · 2 = 49,152 B,
    SSM 8,192 · 16 · 2 = 262,144 B; 311,296 B per sequence per layer.
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.MAMBA1
    spec_conv_rows: ClassVar[bool] = False  # mamba1_state_shape takes no num_spec
    intermediate_size: int
    state_size: int

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        return {"channels": self.intermediate_size}

    def state_tensors(self) -> tuple[StateTensor, ...]:
        inner = self.intermediate_size // self.tp
        return (
            StateTensor(name="conv", shape=(self.conv_kernel - 1, inner), dtype=self.dtype),
            StateTensor(name="ssm", shape=(inner, self.state_size), dtype=self.ssm_dtype),
        )


@frozen
class ShortConvState(RecurrentState):
    """LFM2's gated short convolution: one conv state ``(L − 1, D/tp)``, no SSM state.

    LFM2-2.6B (D = 2,048, L = 3, bf16): 2 · 2,048 · 2 = 8,192 B per sequence per layer.
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.SHORT_CONV
    conv_dim: int

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        return {"conv channels": self.conv_dim}

    def state_tensors(self) -> tuple[StateTensor, ...]:
        shape = (self.conv_rows, self.conv_dim // self.tp)
        return (StateTensor(name="conv", shape=shape, dtype=self.dtype),)


@frozen
class KimiDeltaState(RecurrentState):
    """Kimi Delta Attention: conv ``(k − 1, 3·H·Dh/tp)`` (q, k and v convolved), state ``(H/tp, Dh, Dh)``.

    Kimi-Linear-48B (H = 32, Dh = 128, k = 4): conv 3 · 12,288 · 2 = 73,728 B (bf16), recurrent
    32 · 128 · 128 · 4 = 2,097,152 B (float32); 2,170,880 B per sequence per layer.
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.KIMI_DELTA
    num_heads: int
    head_dim: int
    #: Kimi-K3's full-rank, bounded gate (``use_full_rank_gate`` with a ``gate_lower_bound``): the
    #: only KDA layer vLLM 0.33 can run with the FlashKDA prefill kernel
    flashkda_gate: bool = False

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        return {"conv channels": 3 * self.num_heads * self.head_dim, "heads": self.num_heads}

    def state_tensors(self) -> tuple[StateTensor, ...]:
        tp = self.tp
        conv_dim = 3 * self.num_heads * self.head_dim
        return (
            StateTensor(name="conv", shape=(self.conv_rows, conv_dim // tp), dtype=self.dtype),
            StateTensor(
                name="ssm",
                shape=(self.num_heads // tp, self.head_dim, self.head_dim),
                dtype=self.ssm_dtype,
            ),
        )


@frozen
class ParallelHybrid(RecurrentState):
    """A layer running attention and a recurrent mixer side by side (Falcon-H1): both caches.

    It is a recurrent layer (engines that cannot hold recurrent state refuse it) that also keeps
    ``attention``'s K/V for every token; ``mixer`` holds the state. ``dtype`` follows the KV-cache
    dtype (the attention part); the mixer's states keep their own dtypes.
    """

    variant: ClassVar[RecurrentVariant] = RecurrentVariant.PARALLEL
    attention: FullAttention
    mixer: RecurrentState
    ssm_dtype: CacheDtype = field(init=False)
    conv_kernel: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ssm_dtype", self.mixer.ssm_dtype)
        object.__setattr__(self, "conv_kernel", self.mixer.conv_kernel)

    def state_tensors(self) -> tuple[StateTensor, ...]:
        return self.mixer.state_tensors()

    def tp_split_dims(self, tensor_parallel_size: int) -> dict[str, int]:
        return self.mixer.tp_split_dims(tensor_parallel_size)

    @property
    def bytes_per_token(self) -> int:
        return self.attention.bytes_per_token

    @property
    def num_kv_heads(self) -> int:
        return self.attention.kv_heads

    @property
    def head_dim_k(self) -> int:
        return self.attention.k_dim

    @property
    def head_dim_v(self) -> int:
        return self.attention.v_dim

    def tokens_held(self, num_tokens: int) -> int:
        return num_tokens

    def with_dtype(self, dtype: CacheDtype) -> Layout:
        attention = self.attention.with_dtype(dtype)
        assert isinstance(attention, FullAttention)  # with_dtype keeps the class
        return replace(self, dtype=dtype, attention=attention)

    def with_speculative_tokens(self, tokens: int) -> Layout:
        mixer = self.mixer.with_speculative_tokens(tokens)
        assert isinstance(mixer, RecurrentState)
        return replace(self, mixer=mixer)

    def per_rank(self, tensor_parallel_size: int) -> Layout:
        attention = self.attention.per_rank(tensor_parallel_size)
        mixer = self.mixer.per_rank(tensor_parallel_size)
        assert isinstance(attention, FullAttention) and isinstance(mixer, RecurrentState)
        return replace(self, attention=attention, mixer=mixer)
