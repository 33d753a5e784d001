"""Readers of LFM2 (short convolution), Kimi-Linear (Kimi Delta Attention + MLA) and MiniMax-01.

- LFM2 (``lfm2.py``, ``lfm2_moe.py`` in vLLM 0.33.0): ``layer_types`` of ``conv`` /
  ``full_attention``, or (older configs) ``full_attn_idxs`` with every other layer a convolution
  (transformers' ``Lfm2Config``). The conv state is ``(conv_L_cache − 1, conv_dim)`` (LFM2) or
  ``(conv_L_cache − 1, hidden_size)`` (LFM2-MoE); attention heads are
  ``hidden_size // num_attention_heads`` wide.
- Kimi-Linear (``vllm/models/kimi_k3``): ``linear_attn_config.kda_layers`` lists the KDA layers
  **1-based** (``is_kda_layer``: ``layer_idx + 1 in kda_layers``); every other layer is MLA
  (``kv_lora_rank + qk_rope_head_dim``). The KDA recurrent state is float32 under ``auto``
  (``MambaStateDtypeCalculator.kda_state_dtype``), the conv state the model dtype.
- MiniMax-Text-01 / MiniMax-M1 (``model_type: minimax``): lightning-attention layers. vLLM 0.33
  removed them and transformers' cache for them is not modelled: refused by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import FP32, CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, MLALatent
from kvcalc.model.recurrent_layouts import KimiDeltaState, ShortConvState

LFM2_TYPES = ("lfm2", "lfm2_moe")
KIMI_LINEAR_TYPES = ("kimi_linear",)
MINIMAX01_TYPES = ("minimax",)

_LFM2_KINDS = {"conv": "conv", "full_attention": "attention"}


def read_lfm2(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    types = r.list("layer_types")
    if types is not None:
        note = "layer_types: conv → short convolution, full_attention → attention"
    else:
        idxs = r.index_list("full_attn_idxs")
        idxs = tuple(range(num_layers)) if idxs is None else idxs
        types = ["full_attention" if i in idxs else "conv" for i in range(num_layers)]
        note = f"full_attn_idxs {list(idxs)}: attention there, short convolution elsewhere"
    unknown = sorted({str(t)[:40] for t in types if t not in _LFM2_KINDS})
    if len(types) != num_layers or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {num_layers} layers as conv or full_attention"
            + (f", got {', '.join(unknown)}" if unknown else ""),
            code="config-invalid",
        )
    if hidden <= 0 or hidden % heads:
        raise r.missing(("hidden_size",))
    head_dim = hidden // heads
    kv = r.int("num_key_value_heads", default=heads)
    attention = FullAttention(dtype=dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)
    moe = r.str("model_type", "") == "lfm2_moe"
    width = hidden if moe else r.int("conv_dim")
    kernel = r.int("conv_L_cache", default=3)
    conv = ShortConvState(dtype=dtype, ssm_dtype=dtype, conv_kernel=kernel, conv_dim=width)
    prov["layer pattern"] = note
    prov["short_conv"] = (
        f"conv state ({kernel} − 1, {'hidden_size' if moe else 'conv_dim'} {width}) in the model "
        "dtype (conv_L_cache − 1 columns)"
    )
    return [attention if _LFM2_KINDS[t] == "attention" else conv for t in types]


def read_kimi_linear(
    r: ConfigReader, num_layers: int, heads: int, hidden: int, dtype: CacheDtype,
    prov: dict[str, str],
) -> list[Layout]:  # fmt: skip
    cfg = r.mapping("linear_attn_config")
    if cfg is None:
        raise r.missing(("linear_attn_config",))
    kda = cfg.get("kda_layers")
    if not isinstance(kda, list) or any(
        not isinstance(i, int) or isinstance(i, bool) or not 1 <= i <= num_layers for i in kda
    ):
        raise ConfigError(
            f"{r.source}: {r.path('linear_attn_config')}.kda_layers must list layer numbers "
            f"1..{num_layers} (1-based)",
            code="config-invalid",
        )
    sub = _SubReader(r, "linear_attn_config", cfg)
    num_kda_heads = sub.int("num_heads")
    head_dim = sub.int("head_dim")
    kernel = sub.int("short_conv_kernel_size", 4)
    rank = r.int("kv_lora_rank")
    rope = r.int("qk_rope_head_dim")
    mla = MLALatent(dtype=dtype, kv_lora_rank=rank, rope_dim=rope, num_heads=heads,
                    qk_nope_dim=r.int("qk_nope_head_dim", default=0, minimum=0),
                    v_head_dim=r.int("v_head_dim", default=0, minimum=0))  # fmt: skip
    state = KimiDeltaState(dtype=dtype, ssm_dtype=FP32, conv_kernel=kernel,
                           num_heads=num_kda_heads, head_dim=head_dim,
                           flashkda_gate=bool(cfg.get("use_full_rank_gate"))
                           and cfg.get("gate_lower_bound") is not None)  # fmt: skip
    prov["layer pattern"] = (
        f"linear_attn_config.kda_layers (1-based): {len(kda)} KDA layers, the other "
        f"{num_layers - len(set(kda))} MLA"
    )
    prov["kda"] = (
        f"num_heads {num_kda_heads} × head_dim {head_dim}, short_conv_kernel_size {kernel}; "
        "recurrent state float32 (vLLM's auto for KDA), conv state the model dtype"
    )
    prov["mla"] = f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope} = {rank + rope}"
    return [state if i + 1 in kda else mla for i in range(num_layers)]


def refuse_minimax01(r: ConfigReader) -> None:
    arch = r.raw.get("architectures")
    raise ConfigError(
        f"{r.source}: model_type 'minimax' ({', '.join(arch) if isinstance(arch, list) else 'MiniMax-01'}) "
        "keeps lightning-attention state kvcalc does not model; vLLM 0.33 no longer serves it "
        "(MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM were supported until v0.23.0)",
        hint="kvcalc refuses layouts it cannot size exactly; please file an issue",
        code="config-unsupported",
    )


class _SubReader:
    """Typed reads of a nested mapping (``linear_attn_config``), recorded under its path."""

    def __init__(self, r: ConfigReader, key: str, values: Mapping[str, Any]) -> None:
        self.r, self.key, self.values = r, key, values

    def int(self, name: str, default: int | None = None) -> int:
        value = self.values.get(name)
        path = f"{self.r.path(self.key)}.{name}"
        if value is None:
            if default is None:
                raise self.r.missing((f"{self.key}.{name}",))
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.r.bad(path, value, "a positive integer")
        return value
