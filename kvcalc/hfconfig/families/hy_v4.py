"""HY V4 (``HYV4ForCausalLM``, ``hy_v4``): vLLM 0.33 ``models/hy_v4/`` over vLLM's own
``HYV4Config`` (``transformers_utils/configs/hy_v4.py``, kept in sync with transformers').

Every layer is ``HYV4MLAAttention``: multi-head latent attention, one latent of
``kv_lora_rank + qk_rope_head_dim`` per token and layer (vLLM's ``MLAAttention``, whole on every TP
rank), the class's defaults where config.json omits a key (512, 64; ``qk_nope_head_dim`` 192,
``v_head_dim`` 256). A layer whose ``layer_types`` entry is a sparse type (``sparse_attention``,
``sparse``, ``indexed_attention`` — transformers 5.20's spelling — or ``deepseek_sparse_attention``)
adds a lightning indexer's key cache, shared by the ``indexer_types`` "shared" layers: refused
(what vLLM does is recorded, ``registry_families_hy_v4_sparse.json``, not yet planned here); ``layer_types`` absent (the class's default) or ``full_attention`` on every
layer is dense MLA (recorded). The output gate, the
learnable sink and the hyper-connections (``hc_mult`` channels) shape no cache. The MTP layers
(``num_nextn_predict_layers``) are built only for speculative decoding, which kvcalc does not size
for HY V4. Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.family import TRUST_HINT, Family, LayoutContext, UnverifiedConfigError
from kvcalc.hfconfig.reader import ConfigReader
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
    if any(t != "full_attention" for t in types) or len(types) != n:
        sparse = sorted({str(t) for t in types} & set(_SPARSE))
        what = (
            f"sparse layers ({', '.join(sparse)})"
            if sparse
            else f"layer_types {sorted(set(map(str, types)))}"
        )
        raise UnverifiedConfigError(
            f"{r.source}: HY V4 with {what} is not planned by kvcalc (its sparse layers add a "
            "lightning indexer's key cache, shared by indexer_types; checked: dense MLA, "
            "layer_types absent or full_attention on each of the num_hidden_layers layers)",
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
    return [latent] * n, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="hy-v4",
        model_types={"hy_v4"},
        architectures={"HYV4ForCausalLM"},
        keys={
            "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
            # the query's low-rank projection: no cache
            "q_lora_rank",
            # refused unless every layer is full_attention (above)
            "layer_types",
            # dense or MoE MLP per layer: no cache
            "mlp_layer_types",
            # the indexer of sparse layers, which are refused: unread for dense MLA
            "index_topk", "index_head_dim", "index_n_heads", "indexer_types",
            # HYV4Config writes qk_head_dim = qk_nope + qk_rope (the attention recomputes it), and
            # head_dim = qk_rope_head_dim (a base key: the MLA latent above does not read it)
            "qk_head_dim",
        },
        layer_types={"full_attention"},
        layouts=read_hy_v4,
        note="HY V4: dense MLA latent kv_lora_rank + qk_rope_head_dim per layer (vLLM 0.33 "
        "models/hy_v4); sparse layers refused",
    ),
)  # fmt: skip
