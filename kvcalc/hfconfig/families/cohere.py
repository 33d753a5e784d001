"""Command-R / Command-R+ (``CohereForCausalLM``) and Command-R7B / Command-A (``Cohere2ForCausalLM``).

vLLM 0.33 serves both with ``models/commandr.py``:

- ``CohereConfig`` (v1): full attention on every layer;
- ``Cohere2Config``: ``config.layer_types`` (transformers builds it from ``sliding_window_pattern``,
  default 4, when a checkpoint has none: layer i slides unless (i+1) % pattern == 0), and each
  sliding layer's window is ``sliding_window + 1`` (Cohere's window sees the token and the
  ``sliding_window`` before it; vLLM passes the + 1 to its attention and its cache manager). The head
  width is ``hidden_size / num_attention_heads``: ``Cohere2Config`` sets ``head_dim`` so whatever the
  checkpoint says, and vLLM reads that attribute;
- ``Cohere2MoeForCausalLM`` (``models/cohere2_moe.py``): the same ``sliding_window + 1`` on the
  layers ``layer_types`` marks sliding (``Cohere2MoeConfig`` writes it; a config without it is
  refused here, not recorded), heads ``head_dim`` wide (else ``hidden_size / num_attention_heads``);
  ``mlp_layer_types`` picks the dense and the MoE layers (weights: ``num_experts`` gated experts
  ``intermediate_size`` wide, ``num_shared_experts`` shared ones).

Command-A Vision (``cohere2_vision``: ``Cohere2VisionForConditionalGeneration``): vLLM 0.33's
``cohere2_vision.py`` builds its ``text_config`` (a ``Cohere2Config``) as ``Cohere2ForCausalLM``
(``init_vllm_registered_model``), the same cache; the SigLIP tower holds none.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.generic import head_dims, kv_heads
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow

#: ``Cohere2Config`` defaults (transformers), used where the checkpoint leaves the key out
_PATTERN, _WINDOW = 4, 4096


def read_cohere2(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    types = r.list("layer_types")
    if types is not None:
        kinds, note = L.layer_kinds(r, n)
        if set(kinds) - {L.FULL, L.SLIDING}:
            raise ConfigError(f"{r.source}: Cohere2 layer_types must be sliding/full attention",
                              code="config-unverified")  # fmt: skip
    else:
        pattern = r.int("sliding_window_pattern", default=_PATTERN)
        kinds = [L.FULL if (i + 1) % pattern == 0 else L.SLIDING for i in range(n)]
        note = f"Cohere2 sliding_window_pattern {pattern}: layer i slides unless (i+1) % {pattern} == 0"
    prov["layer pattern"] = note
    window = r.int("sliding_window", default=_WINDOW)
    prov["sliding_window"] = (
        f"sliding_window + 1 = {window} + 1 = {window + 1} (vLLM 0.33 commandr.py: Cohere's window "
        "sees the token and the sliding_window before it)"
    )
    if ctx.hidden_size % heads:
        raise ConfigError(
            f"{r.source}: hidden_size {ctx.hidden_size} is not divisible by num_attention_heads {heads}",
            code="config-invalid",
        )
    head_dim = ctx.hidden_size // heads
    prov["head_dim"] = (
        f"hidden_size / num_attention_heads = {ctx.hidden_size} / {heads} = {head_dim} "
        "(Cohere2Config sets head_dim so; a head_dim in config.json is overwritten)"
    )
    kv = kv_heads(r, heads, n, prov)
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if kind is L.SLIDING:
            out.append(SlidingWindow(dtype=ctx.dtype, kv_heads=kv[i], k_dim=head_dim,
                                     v_dim=head_dim, sliding_window=window + 1))  # fmt: skip
        else:
            out.append(
                FullAttention(dtype=ctx.dtype, kv_heads=kv[i], k_dim=head_dim, v_dim=head_dim)
            )
    return L.with_weight_kinds(out)


def read_cohere2_moe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, heads, prov = ctx.num_layers, ctx.num_attention_heads, ctx.provenance
    if r.list("layer_types") is None:
        raise ConfigError(
            f"{r.source}: Cohere2-MoE without layer_types was not checked against vLLM 0.33",
            hint="Cohere2MoeConfig writes layer_types; add it to config.json",
            code="config-unverified",
        )
    kinds, prov["layer pattern"] = L.layer_kinds(r, n)
    if set(kinds) - {L.FULL, L.SLIDING}:
        raise ConfigError(f"{r.source}: Cohere2-MoE layer_types must be sliding/full attention",
                          code="config-unverified")  # fmt: skip
    window = r.int("sliding_window", default=_WINDOW) + 1
    prov["sliding_window"] = f"sliding_window + 1 = {window} (vLLM 0.33 cohere2_moe.py)"
    kv = kv_heads(r, heads, n, prov)
    hd = head_dims(r, heads, ctx.hidden_size, n, prov)
    out: list[Layout] = [
        SlidingWindow(dtype=ctx.dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i],
                      sliding_window=window)
        if kind is L.SLIDING
        else FullAttention(dtype=ctx.dtype, kv_heads=kv[i], k_dim=hd[i], v_dim=hd[i])
        for i, kind in enumerate(kinds)
    ]  # fmt: skip
    return L.with_weight_kinds(out)


FAMILIES = (
    Family(
        name="cohere",
        model_types={"cohere"},
        architectures={"CohereForCausalLM"},
        note="Command-R: full attention per layer",
    ),
    Family(
        name="cohere2",
        model_types={"cohere2", "cohere2_vision"},
        architectures={"Cohere2ForCausalLM", "Cohere2VisionForConditionalGeneration"},
        keys={"sliding_window", "sliding_window_pattern", "layer_types"},
        layer_types={"sliding_attention", "full_attention"},
        layouts=read_cohere2,
        note="Command-R7B / Command-A: layer_types (or sliding_window_pattern), window sliding_window + 1",
    ),
    Family(
        name="cohere2_moe",
        model_types={"cohere2_moe"},
        architectures={"Cohere2MoeForCausalLM"},
        # sliding_window_pattern / prefix_dense_sliding_window_pattern: what transformers built
        # layer_types from (read: layer_types); mlp_layer_types: the MLP of each layer (weights)
        keys={
            "sliding_window",
            "sliding_window_pattern",
            "layer_types",
            "mlp_layer_types",
            "prefix_dense_sliding_window_pattern",
        },  # fmt: skip
        layer_types={"sliding_attention", "full_attention"},
        layouts=read_cohere2_moe,
        note="Command-A MoE: layer_types sliding/full, window sliding_window + 1",
    ),
)
