"""Kimi-Linear (``vllm/models/kimi_k3``, vLLM 0.33.0): ``linear_attn_config.kda_layers`` lists the
KDA layers **1-based** (``is_kda_layer``: ``layer_idx + 1 in kda_layers``); every other layer is MLA
(``kv_lora_rank + qk_rope_head_dim``). The KDA recurrent state is float32 under ``auto``
(``MambaStateDtypeCalculator.kda_state_dtype``), the conv state the model dtype.

Weights: the KDA mixers of :func:`kda_weights` (low-rank forget and output gates; a full-rank gate,
``use_full_rank_gate``, is refused, not guessed), the MLA layers without RoPE (``mla_use_nope``:
vLLM builds none; a RoPE'd MLA, whose cache vLLM keeps in fp32, is refused), MoE from
``first_k_dense_replace`` with ``num_experts_per_token`` routed of ``num_experts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import MoeWeights
from kvcalc.hfconfig.weight_shape_extra import KdaWeights
from kvcalc.model.dtypes import FP32, CacheDtype
from kvcalc.model.layouts import Layout, MLALatent, RecurrentVariant
from kvcalc.model.recurrent_layouts import KimiDeltaState


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


def kda_weights(r: ConfigReader) -> KdaWeights:
    """The KDA mixer's dimensions; a full-rank gate or a RoPE'd MLA layer is refused."""
    cfg = r.mapping("linear_attn_config") or {}
    sub = _SubReader(r, "linear_attn_config", cfg)
    if cfg.get("use_full_rank_gate") or not r.bool("mla_use_nope"):
        what = "a full-rank KDA gate" if cfg.get("use_full_rank_gate") else "RoPE on its MLA layers"
        raise ConfigError(
            f"{r.source}: Kimi-Linear with {what}: its weights are not counted from config.json",
            hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
        )
    return KdaWeights(
        num_heads=sub.int("num_heads"),
        head_dim=sub.int("head_dim"),
        conv_kernel=sub.int("short_conv_kernel_size", 4),
    )


def kimi_moe(r: ConfigReader, moe: MoeWeights | None) -> MoeWeights | None:
    """The routed experts' top-k (``num_experts_per_token``) and vLLM's per-rank expert width
    floor (``KimiMoE``, vLLM 0.33 ``models/kimi_k3/nvidia/model.py``: under TP without EP, a rank's share of ``moe_intermediate_size`` below
    ``min_moe_intermediate_per_partition``, 256, is padded up to it)."""
    if moe is None:
        return None
    return replace(
        moe,
        experts_per_token=r.int("num_experts_per_token", default=1),
        min_width_per_rank=r.int("min_moe_intermediate_per_partition", default=256),
        score_bias=True,  # KimiMoE's fp32 gate.e_score_correction_bias
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


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    layouts = read_kimi_linear(
        r, ctx.num_layers, ctx.num_attention_heads, ctx.hidden_size, ctx.dtype, ctx.provenance
    )
    return hybrid_weight_kinds(layouts, {KimiDeltaState: RecurrentVariant.KIMI_DELTA})


FAMILIES = (
    Family(
        name="kimi-linear",
        model_types={"kimi_linear"},
        architectures={"KimiLinearForCausalLM"},
        keys={
            "linear_attn_config",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            # a top-level one is not read: vLLM's kimi_linear takes linear_attn_config's (read above)
            "short_conv_kernel_size",
            "mla_use_nope",
            "num_experts_per_token",
            "min_moe_intermediate_per_partition",
        },
        layer_types=frozenset(),
        layouts=_layouts,
        note="Kimi-Linear: KDA linear attention and MLA layers.",
    ),
)
