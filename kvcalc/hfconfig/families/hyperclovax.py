"""HyperCLOVA X (``HyperCLOVAXForCausalLM``): full attention on every layer.

vLLM 0.33 ``models/hyperclovax.py`` (with transformers' ``HyperCLOVAXConfig``, which vLLM's config
registry names as the upstream class): ``num_key_value_heads`` KV heads (split over TP, or
replicated when fewer than TP: ``tp % kv == 0``), ``head_dim`` wide (the config class writes
``hidden_size / num_attention_heads`` when it is not given), no window; the muP multipliers
(embedding, residual, attention, logits) shape no cache. A ``dual_chunk_attention_config`` makes
its attention a dual-chunk one, which was not recorded: refused. Weights
(``modeling_hyperclovax.py``): Llama's, with two more RMSNorms per layer (``post_norm1``,
``post_norm2``) when ``use_post_norm`` (the config class's default: Peri-LN).

HyperCLOVA X SEED Vision V2 (``HCXVisionV2ForCausalLM``, ``hyperclovax_vision_v2``: vLLM 0.33
``hyperclovax_vision_v2.py`` over transformers' ``HyperCLOVAXVisionV2Config``) builds its
``text_config`` as the registered model of its type; only a HyperCLOVA X text model was recorded
(vLLM also takes ``llama`` and ``gpt2`` ones): another is refused. Its Qwen2.5-VL vision tower and
linear projector (weighed in ``hfconfig/weights_vision.py``) hold no cache.
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import TRUST_HINT, Family, LayoutContext, UnverifiedConfigError
from kvcalc.hfconfig.generic import head_dims, kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout

VISION_V2 = "hyperclovax_vision_v2"


def hyperclovax_norms(r: ConfigReader) -> int:
    """RMSNorms per decoder layer: input and post-attention, and the two post-norms of Peri-LN."""
    return 4 if r.bool("use_post_norm", True) else 2


def read_hyperclovax(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    if r.raw.get("model_type") == VISION_V2 and r.text.get("model_type") != "hyperclovax":
        raise UnverifiedConfigError(
            f"{r.source}: HyperCLOVA X Vision V2 with text_config.model_type "
            f"{r.text.get('model_type')!r} was not checked against vLLM 0.33 (recorded: a "
            "hyperclovax text model)",
            model_type=VISION_V2,
            architectures=("HCXVisionV2ForCausalLM",),
            keys=("text_config.model_type",),
            hint=TRUST_HINT,
        )
    if r.value("dual_chunk_attention_config") is not None:
        raise UnverifiedConfigError(
            f"{r.source}: HyperCLOVA X with dual_chunk_attention_config was not checked against "
            "vLLM 0.33 (hyperclovax.py then builds a dual-chunk attention)",
            model_type="hyperclovax",
            architectures=("HyperCLOVAXForCausalLM",),
            keys=("dual_chunk_attention_config",),
            hint=TRUST_HINT,
        )
    n, prov = ctx.num_layers, ctx.provenance
    prov["layer pattern"] = "HyperCLOVA X: every layer full attention (vLLM 0.33 hyperclovax.py)"
    kv = kv_heads(r, ctx.num_attention_heads, n, prov)
    width = head_dims(r, ctx.num_attention_heads, ctx.hidden_size, n, prov)
    return L.with_weight_kinds(
        [
            FullAttention(dtype=ctx.dtype, kv_heads=kv[i], k_dim=width[i], v_dim=width[i])
            for i in range(n)
        ]
    )


FAMILIES = (
    Family(
        name="hyperclovax",
        model_types={"hyperclovax", VISION_V2},
        architectures={"HyperCLOVAXForCausalLM", "HCXVisionV2ForCausalLM"},
        # refused when set (a dual-chunk attention)
        keys={"dual_chunk_attention_config"},
        layouts=read_hyperclovax,
        note="HyperCLOVA X: full attention per layer (vLLM 0.33 hyperclovax.py)",
    ),
)
