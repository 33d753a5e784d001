"""HY V4 (``HYV4ForCausalLM``, ``hy_v4``): vLLM 0.33 ``models/hy_v4/`` over vLLM's own
``HYV4Config`` (``transformers_utils/configs/hy_v4.py``, kept in sync with transformers').

Every layer is ``HYV4MLAAttention``: multi-head latent attention, one latent of
``kv_lora_rank + qk_rope_head_dim`` per token and layer (vLLM's ``MLAAttention``, whole on every TP
rank), the class's defaults where config.json omits a key (512, 64; ``qk_nope_head_dim`` 192,
``v_head_dim`` 256); ``layer_types`` absent (the class's default) or ``full_attention`` on every
layer is dense MLA (recorded). A sparse entry (``sparse_attention``, ``sparse``,
``indexed_attention`` — transformers 5.20's spelling — or ``deepseek_sparse_attention``) makes the
layer DeepSeek-V3.2-style sparse MLA (block 64, the latent as ``fp8_ds_mla`` under fp8) with a
lightning indexer's fp8 key cache on the layers whose ``indexer_types`` entry is "full" (the
class's default: layer 0 and every fourth from 1), the "shared" ones reusing it: planned when
every layer is sparse (recorded: ``registry_families_hy_v4_sparse.json``, on an H100); a mix of
dense and sparse layers keeps the dense latents in their own fp8 layout (recorded) and is
refused. The output gate, the learnable sink and the hyper-connections (``hc_mult`` channels)
shape no cache. The MTP layers
(``num_nextn_predict_layers``) are built only for speculative decoding, which kvcalc does not size
for HY V4. Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import TRUST_HINT, Family, LayoutContext, UnverifiedConfigError
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.attention_layouts import SparseMLA
from kvcalc.model.layouts import Layout, MLALatent

#: ``HYV4Config``'s MLA defaults
_DEFAULTS = {
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 192,
    "v_head_dim": 256,
}
#: ``models/hy_v4/nvidia/attention.py`` ``_SPARSE_LAYER_TYPES``
_SPARSE = ("sparse_attention", "sparse", "indexed_attention", "deepseek_sparse_attention")


def read_hy_v4(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    types = r.list("layer_types") or ["full_attention"] * n  # absent: HYV4Config's None, dense
    sparse = len(types) == n and all(t in _SPARSE for t in types)
    if not sparse and (any(t != "full_attention" for t in types) or len(types) != n):
        mixed = sorted({str(t) for t in types} & set(_SPARSE))
        what = (
            f"layer_types mixing dense and sparse layers ({', '.join(mixed)})"
            if mixed
            else f"layer_types {sorted(set(map(str, types)))}"
        )
        raise UnverifiedConfigError(
            f"{r.source}: HY V4 with {what} is not planned by kvcalc (checked: every layer dense "
            "MLA, or every layer sparse; recorded beside them, a mix keeps the dense latents in "
            "their own fp8 layout, which kvcalc does not model)",
            model_type="hy_v4",
            architectures=("HYV4ForCausalLM",),
            keys=("layer_types",),
            hint=TRUST_HINT,
        )
    dims = {k: r.int(k, default=v, minimum=0) for k, v in _DEFAULTS.items()}
    rank, rope = dims["kv_lora_rank"], dims["qk_rope_head_dim"]
    prov["mla"] = (
        f"kv_lora_rank + qk_rope_head_dim = {rank} + {rope} = {rank + rope} (HYV4Config's "
        "defaults 512 + 64; one latent, whole on every TP rank)"
    )
    prov["layer pattern"] = "HY V4: dense MLA on every layer (vLLM 0.33 models/hy_v4)"
    latent = MLALatent(
        dtype=ctx.dtype,
        kv_lora_rank=rank,
        rope_dim=rope,
        num_heads=ctx.num_attention_heads,
        qk_nope_dim=dims["qk_nope_head_dim"],
        v_head_dim=dims["v_head_dim"],
    )
    if sparse:
        return _sparse_every_layer(r, ctx, latent)
    return [latent] * n, (L.UNCOUNTED,) * n


def _indexer_types(r: ConfigReader, n: int) -> list[str]:
    """``indexer_types``, or ``HYV4Config``'s default: "full" on layer 0 and every fourth from 1
    (1, 5, 9, ...), "shared" elsewhere; checked as ``compute_skip_topk_layers`` checks it."""
    kinds = r.list("indexer_types")
    if kinds is None:
        return ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
    if len(kinds) != n or set(kinds) - {"full", "shared"}:
        raise ConfigError(
            f"{r.source}: indexer_types must list 'full' or 'shared' for each of the {n} layers "
            "(vLLM 0.33's models/hy_v4 compute_skip_topk_layers raises ValueError)",
            code="config-invalid",
        )
    return [str(k) for k in kinds]


def _sparse_every_layer(
    r: ConfigReader, ctx: LayoutContext, latent: MLALatent
) -> tuple[list[Layout], tuple[str, ...]]:
    """Every layer sparse: the latent on the sparse MLA backend, and an fp8 indexer key cache
    (``index_head_dim`` wide, DeepSeek-V3.2's ``DeepseekV32IndexerCache``) on each layer whose
    ``indexer_types`` entry is "full"; a "shared" one reuses the closest preceding full indexer's
    top-k and keeps no indexer cache (``create_indexer`` false)."""
    n, prov = ctx.num_layers, ctx.provenance
    kinds = _indexer_types(r, n)
    width = r.int("index_head_dim", default=128, minimum=1)
    prov["layer pattern"] = (
        f"HY V4: sparse MLA on every layer, an indexer key cache of {width} on the "
        f"{kinds.count('full')} 'full' indexer_types layers (vLLM 0.33 models/hy_v4)"
    )
    fields = {k: getattr(latent, k) for k in ("dtype", "kv_lora_rank", "rope_dim", "num_heads",
                                                "qk_nope_dim", "v_head_dim")}  # fmt: skip
    layers: list[Layout] = [
        SparseMLA(**fields, index_head_dim=width if indexer == "full" else 0) for indexer in kinds
    ]
    return layers, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="hy-v4",
        model_types={"hy_v4"},
        architectures={"HYV4ForCausalLM"},
        keys={
            "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
            # the query's low-rank projection: no cache
            "q_lora_rank",
            # every layer full_attention (dense MLA) or every layer sparse; a mix refused (above)
            "layer_types",
            # dense or MoE MLP per layer: no cache
            "mlp_layer_types",
            # the sparse layers' indexer: its key width and which layers keep one (indexer_types);
            # top-k and head count shape no cache
            "index_topk", "index_head_dim", "index_n_heads", "indexer_types",
            # HYV4Config writes qk_head_dim = qk_nope + qk_rope (the attention recomputes it), and
            # head_dim = qk_rope_head_dim (a base key: the MLA latent above does not read it)
            "qk_head_dim",
        },
        layer_types={"full_attention", *_SPARSE},
        layouts=read_hy_v4,
        note="HY V4: MLA latent kv_lora_rank + qk_rope_head_dim per layer, dense or (every layer) "
        "sparse with indexer keys on the indexer_types 'full' layers (vLLM 0.33 models/hy_v4)",
    ),
)  # fmt: skip
