"""Kimi-Linear (``vllm/models/kimi_k3``, vLLM 0.33.0): ``linear_attn_config.kda_layers`` lists the
KDA layers **1-based** (``is_kda_layer``: ``layer_idx + 1 in kda_layers``); every other layer is MLA
(``kv_lora_rank + qk_rope_head_dim``). The KDA recurrent state is float32 under ``auto``
(``MambaStateDtypeCalculator.kda_state_dtype``), the conv state the model dtype. Its KDA mixers are
not counted by the weight count (refused, not guessed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.families._hybrid import hybrid_weight_kinds
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import FP32, CacheDtype
from kvcalc.model.layouts import Layout, MLALatent
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
    return hybrid_weight_kinds(layouts, {})


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
        },
        layer_types=frozenset(),
        layouts=_layouts,
        note="Kimi-Linear: KDA linear attention and MLA layers.",
    ),
)
