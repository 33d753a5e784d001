"""Step3's text model (``Step3TextForCausalLM``): full attention on every layer, one KV head.

vLLM 0.33 ``models/step3_text.py`` with vLLM's own ``Step3TextConfig``
(``transformers_utils/configs/step3_vl.py``): every layer's ``Step3TextAttention`` is built with one
KV head (``num_kv_heads=1``, whatever the config says; replicated under TP), ``head_dim`` wide
(the config class's default 256), and ``num_attention_heads`` query heads TP must divide; no window.
The MoE layers come from ``moe_layers_enum``, which the model file splits as a comma-separated
string: the config class's own default (a tuple of ints, a list in config.json) fails to build
(``AttributeError``), so a config whose ``moe_layers_enum`` is not a string or null is refused here;
null means every layer but the first. Weights: q through a low-rank ``share_q_dim`` path (a
``qkv_proj`` replicated on every rank with the single K and V head, an RMSNorm, then ``wq``
split over TP), ``o_proj``; MoE layers ``moe_num_experts`` gated experts ``moe_intermediate_size``
wide (``moe_top_k``) and a shared expert ``share_expert_dim`` wide, the others a gated MLP
``intermediate_size`` wide; an lm_head never tied; the RoPE cache ``max_position_embedding`` rows.

Step3-VL (``step3_vl``: ``step3_vl.py``) builds its ``text_config`` as the model it names
(``init_vllm_registered_model``: ``Step3TextForCausalLM``; vLLM fails on a ``text_config``
naming no architecture, as the config class's defaults write it: refused); its tower and
downsamplers hold no cache.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights, MoeWeights
from kvcalc.model.layouts import FullAttention, Layout

#: Step3TextConfig's defaults where config.json has no value
_HEAD_DIM, _SHARE_Q_DIM = 256, 2048


def _moe_layers(r: ConfigReader, n: int) -> tuple[bool, ...]:
    """Which layers are MoE, as ``Step3TextDecoderLayer`` splits ``moe_layers_enum``."""
    raw = r.value("moe_layers_enum")
    if raw is None:  # "Default to 1dense"
        return tuple(i >= 1 for i in range(n))
    if not isinstance(raw, str):
        raise ConfigError(
            f"{r.source}: moe_layers_enum is {type(raw).__name__}, but vLLM 0.33's step3_text.py "
            "splits it as a comma-separated string (moe_layers_enum.strip(): AttributeError; "
            "Step3TextConfig's own default is a tuple)",
            hint='write moe_layers_enum as "4,5,...,59" (Step3 checkpoints do), or null',
            code="config-invalid",
        )
    chosen = {int(x) for x in raw.strip().split(",")}
    return tuple(i in chosen for i in range(n))


def step3_attention(r: ConfigReader, heads: int) -> AttentionWeights:
    return AttentionWeights(
        num_heads=heads,
        num_kv_heads=1,
        head_dim=r.int("head_dim", default=_HEAD_DIM),
        q_lora_rank=r.int("share_q_dim", default=_SHARE_Q_DIM),
    )


def step3_moe(r: ConfigReader, n: int) -> tuple[MoeWeights, tuple[bool, ...]]:
    moe = MoeWeights(
        num_experts=r.int("moe_num_experts", default=48),
        experts_per_token=r.int("moe_top_k", default=3),
        expert_intermediate_size=r.int("moe_intermediate_size", default=5120),
        shared_intermediate_size=r.int("share_expert_dim", default=5120),
    )
    return moe, _moe_layers(r, n)


def read_step3_text(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.raw.get("model_type") == "step3_vl" and not r.text.get("architectures"):  # vLLM's first
        raise ConfigError(
            f"{r.source}: no text_config.architectures: vLLM 0.33's step3_vl.py builds the text "
            "model by the architecture text_config names (init_vllm_registered_model), and "
            "Step3VLConfig's defaults write none (vLLM fails: No model architectures are specified)",
            hint='add "architectures": ["Step3TextForCausalLM"] to text_config',
            code="config-invalid",
        )
    _moe_layers(r, ctx.num_layers)  # refused before the build, as vLLM fails there
    width = r.int("head_dim", default=_HEAD_DIM)
    ctx.provenance["head_dim"] = f"{r.path('head_dim')} = {width} (Step3TextConfig's default 256)"
    ctx.provenance["num_kv_heads"] = "1 (vLLM 0.33 step3_text.py builds num_kv_heads=1)"
    ctx.provenance["layer pattern"] = "Step3 text: every layer full attention (step3_text.py)"
    return L.with_weight_kinds(
        [FullAttention(dtype=ctx.dtype, kv_heads=1, k_dim=width, v_dim=width)] * ctx.num_layers
    )


FAMILIES = (
    Family(
        name="step3_text",
        model_types={"step3_text", "step3_vl"},
        architectures={"Step3TextForCausalLM", "Step3VLForConditionalGeneration"},
        # num_attention_groups: Step3TextConfig's KV-group count, not read (step3_text.py builds one)
        keys={"num_attention_groups", "moe_layers_enum", "share_q_dim"},
        layouts=read_step3_text,
        note="Step3 text: full attention per layer, one KV head of head_dim (vLLM 0.33 "
        "step3_text.py)",
    ),
)
