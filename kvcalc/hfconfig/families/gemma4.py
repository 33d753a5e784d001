"""Gemma 4: per-type head shapes and KV sharing, read as transformers and vLLM read them.

Gemma 4 (``Gemma4TextConfig.__post_init__``, transformers 5.x; ``vllm/model_executor/models/gemma4.py``,
vLLM 0.33.0): ``layer_types`` names each layer (the last one is forced to full attention); sliding
layers have ``num_key_value_heads`` heads of ``head_dim``; full ("global") layers have
``global_head_dim`` and, when ``attention_k_eq_v`` is set, ``num_global_key_value_heads`` heads.
K and V are both cached even where the checkpoint ships K only (vLLM loads K into both slots).

KV sharing (Gemma 4 ``gemma4.py``, as Gemma-3n's ``gemma3n.py``; :mod:`._gemma_layers`): the last ``num_kv_shared_layers``
layers read the cache of the last earlier layer of the same type; vLLM gives them no KV-cache spec
and transformers no cache layer, so they are charged nothing.

Its weights' global layers (:func:`gemma4_global`, for :mod:`kvcalc.hfconfig.weights`) are read
here too.

Gemma-4-31B: sliding 16 KV heads × (256 + 256) × 2 B = 16,384 B per token per layer, global
4 × (512 + 512) × 2 B = 8,192 B; 50 sliding + 10 global layers.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._gemma_layers import layer_types, shared_sources
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape import AttentionWeights, MoeWeights
from kvcalc.model.attention_layouts import SharedKV
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow

GEMMA4_TYPES = ("gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text")


def read_gemma4(
    r: ConfigReader, num_layers: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    kinds = layer_types(r, num_layers, prov)
    if kinds[-1] != L.FULL:
        kinds[-1] = L.FULL
        prov["layer pattern"] += "; the last layer is forced to full attention (transformers)"
    kv = r.int("num_key_value_heads")
    head = r.int("head_dim")
    window = r.int("sliding_window")
    global_head = r.int("global_head_dim")
    global_kv = kv
    if r.bool("attention_k_eq_v"):
        global_kv = r.int("num_global_key_value_heads", default=kv)
    prov["sliding layers"] = (
        f"num_key_value_heads {kv} × head_dim {head}, {r.path('sliding_window')} = {window}"
    )
    prov["global layers"] = f"{global_kv} KV heads × global_head_dim {global_head}" + (
        " (attention_k_eq_v: num_global_key_value_heads; V cached as well)"
        if r.bool("attention_k_eq_v")
        else ""
    )
    mode = r.str("use_bidirectional_attention")
    if mode == "all":
        window = window // 2 + 1
        prov["sliding layers"] += (
            f" (use_bidirectional_attention 'all': window // 2 + 1 = {window})"
        )
    shared = shared_sources(r, kinds, 0, prov)
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if i in shared:
            out.append(SharedKV(dtype=dtype, source_layer=shared[i]))
        elif kind == L.SLIDING:
            out.append(
                SlidingWindow(
                    dtype=dtype, kv_heads=kv, k_dim=head, v_dim=head, sliding_window=window
                )
            )
        else:
            out.append(
                FullAttention(dtype=dtype, kv_heads=global_kv, k_dim=global_head, v_dim=global_head)
            )
    return out


#: Gemma 4 keys whose layouts the count does not model (per-layer inputs, KV sharing, double-wide
#: MLPs, audio): a config using one is refused, not guessed
_GEMMA4_UNCOUNTED = ("hidden_size_per_layer_input", "num_kv_shared_layers", "use_double_wide_mlp",
                     "audio_config")  # fmt: skip


def gemma4_moe(r: ConfigReader, n: int) -> tuple[MoeWeights | None, tuple[bool, ...]]:
    """Gemma 4's MoE block (26B-A4B), beside the dense MLP in every layer: vLLM 0.33's
    ``Gemma4DecoderLayer`` builds it where ``num_experts`` is set (transformers where
    ``enable_moe_block`` is; a config saying one without the other is refused): the router
    (projection, ``scale``, ``per_expert_scale``), ``num_experts`` experts of
    ``moe_intermediate_size`` (else ``expert_intermediate_size``), top ``top_k_experts``, and
    three more norms."""
    experts = r.int("num_experts", default=0, minimum=0)
    if bool(experts) != r.bool("enable_moe_block"):
        raise ConfigError(
            f"{r.source}: Gemma 4 with num_experts {experts or None} and enable_moe_block "
            f"{r.bool('enable_moe_block')}: vLLM builds the MoE block from the first, transformers "
            "from the second; its weights are not counted from config.json",
            hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
        )
    if not experts:
        return None, (False,) * n
    moe = MoeWeights(
        num_experts=experts,
        experts_per_token=r.int("top_k_experts"),
        expert_intermediate_size=r.int("moe_intermediate_size", "expert_intermediate_size"),
        gemma4_router=True,
    )
    return moe, (True,) * n


def gemma4_global(r: ConfigReader, sliding: AttentionWeights) -> AttentionWeights:
    """Gemma 4's global layers: ``global_head_dim``, ``num_global_key_value_heads``, and no v_proj
    under ``attention_k_eq_v`` (transformers' Gemma4TextAttention)."""
    for key in _GEMMA4_UNCOUNTED:
        value = r.value(key)
        if value not in (None, False, 0):
            raise ConfigError(
                f"{r.source}: Gemma 4 with {key} = {value!r}: its weights are not counted "
                "from config.json (the dense and MoE layouts of Gemma-4-31B and 26B-A4B are)",
                hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
            )
    return AttentionWeights(
        num_heads=sliding.num_heads,
        num_kv_heads=r.int("num_global_key_value_heads", default=sliding.num_kv_heads),
        head_dim=r.int("global_head_dim", default=sliding.head_dim),
        qkv_bias=sliding.qkv_bias,
        o_bias=sliding.o_bias,
        qk_norm=True,
        v_proj=not r.bool("attention_k_eq_v"),
        v_slot=r.bool("attention_k_eq_v"),  # vLLM loads K into both slots of qkv_proj
    )


def gemma4_global_rope_values(r: ConfigReader, global_head: int) -> int:
    """The global layers' own RoPE cache vLLM builds (``get_rope(global_head_dim, ...)`` with the
    full-attention parameters): ``max_position_embeddings`` × ``global_head_dim`` values (the
    ``proportional`` RoPE caches the whole head; Gemma-4 26B-A4B's shape: 32,768 × 512)."""
    return r.int("max_position_embeddings") * global_head


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return with_weight_kinds(read_gemma4(r, ctx.num_layers, ctx.dtype, ctx.provenance))


FAMILIES = (
    Family(
        name="gemma4",
        model_types={"gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"},
        architectures={"Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_global_key_value_heads",
            "global_head_dim",
            "num_kv_shared_layers",
            "attention_k_eq_v",
        },  # fmt: skip
        layer_types={"sliding_attention", "full_attention"},
        layouts=_layouts,
        note="per-type KV heads and head dims (global layers wider), KV sharing",
    ),
)
