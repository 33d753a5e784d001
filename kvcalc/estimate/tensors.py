"""Every weight tensor a model has, as plain records, from a :class:`WeightShape` (pure arithmetic).

This is the inventory :mod:`kvcalc.estimate.weights` counts and prices. Each :class:`Tensor` says how many
values it holds, which role it plays (decides whether a quantization method touches it), which
decoder layer owns it (decides its pipeline stage) and how tensor parallelism splits it, following
vLLM's parallel layers:

- ``column``: output rows split across ranks (q/k/v, gate/up, expert gate_up, Mamba in_proj);
- ``row``: input columns split (o_proj, down_proj); a row-parallel bias is replicated;
- ``kv``: K/V projections split by KV heads, replicated when there are fewer KV heads than ranks
  (each rank keeps ``max(1, kv_heads // tp)`` heads: vLLM's ``QKVParallelLinear``);
- ``vocab``: embedding and lm_head rows split by vocabulary (vLLM pads the vocabulary to a multiple
  of 64 first; kvcalc ignores that padding, < 64 rows);
- ``replicated``: norms, routers, MLA's q_a/kv_a down-projections, learned position tables.

Names follow the Llama layout (``model.layers.{i}.self_attn.q_proj``) whatever the family, so that
``modules_to_not_convert`` patterns such as ``model.layers.*.self_attn`` can be matched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvcalc.hfconfig.weight_shape import (
    AttentionWeights,
    GdnWeights,
    Mamba2Weights,
    MlaWeights,
    MlpWeights,
    MoeWeights,
    VisionWeights,
    WeightShape,
)
from kvcalc.model.layouts import RecurrentVariant
from kvcalc.units import cdiv

#: roles a weight-quantization method may convert (the rest stay in the model dtype)
QUANTIZABLE_ROLES = frozenset({"linear"})


@dataclass(frozen=True, kw_only=True)
class Tensor:
    name: str
    rows: int
    cols: int = 1
    #: linear, embedding, lm_head, position, norm, bias, router, conv, vector
    role: str
    layer: int | None = None
    #: stacked copies (routed experts); ``rows × cols`` is one copy
    copies: int = 1
    expert: bool = False
    vision: bool = False
    split: str = "replicated"
    #: heads stacked along rows (``kv`` split only)
    heads: int = 1

    @property
    def numel(self) -> int:
        return self.rows * self.cols * self.copies

    def shape_per_rank(self, tp: int) -> tuple[int, int]:
        """``(rows, cols)`` of one copy on one tensor-parallel rank."""
        if self.split == "column" or self.split == "vocab":
            return cdiv(self.rows, tp), self.cols
        if self.split == "row":
            return self.rows, cdiv(self.cols, tp)
        if self.split == "kv":
            return self.rows // self.heads * max(1, self.heads // tp), self.cols
        return self.rows, self.cols


def inventory(w: WeightShape) -> tuple[Tensor, ...]:
    """All tensors of the model transformers builds (MTP layers excluded)."""
    out: list[Tensor] = []
    h = w.hidden_size
    out.append(
        Tensor(
            name="model.embed_tokens", rows=w.vocab_size, cols=h, role="embedding", split="vocab"
        )
    )
    if w.learned_positions:
        out.append(
            Tensor(name="model.embed_positions", rows=w.learned_positions, cols=h, role="position")
        )
    for i in range(w.num_layers):
        p = f"model.layers.{i}"
        out += _norm(w, f"{p}.input_layernorm", h, i, count=w.norms_per_layer)
        mixer = w.mixers[i] if i < len(w.mixers) else "none"
        if mixer == "attention" and w.attention:
            out += _attention(w.attention, h, f"{p}.self_attn", i)
        elif mixer == "mla" and w.mla:
            out += _mla(w.mla, h, f"{p}.self_attn", i)
        elif mixer == RecurrentVariant.MAMBA2 and w.mamba2:
            out += _mamba2(w.mamba2, h, f"{p}.mixer", i)
        elif mixer == RecurrentVariant.GATED_DELTANET and w.gdn:
            out += _gdn(w.gdn, h, f"{p}.linear_attn", i)
        ffn = w.ffns[i] if i < len(w.ffns) else "none"
        if ffn == "dense" and w.mlp:
            out += _mlp(w.mlp, h, f"{p}.mlp", i)
        elif ffn == "moe" and w.moe:
            out += _moe(w.moe, h, f"{p}.mlp", i)
    out += _norm(w, "model.norm", h, None)
    if not w.tie_word_embeddings:
        out.append(Tensor(name="lm_head", rows=w.vocab_size, cols=h, role="lm_head", split="vocab"))
    if w.vision:
        out += _vision(w.vision)
    return tuple(out)


def _linear(name: str, rows: int, cols: int, layer: int | None, split: str, *, bias: bool = False,
            heads: int = 1, role: str = "linear") -> list[Tensor]:  # fmt: skip
    out = [
        Tensor(name=name, rows=rows, cols=cols, role=role, layer=layer, split=split, heads=heads)
    ]
    if bias:  # a column-parallel bias is split with its rows; a row-parallel one is replicated
        out.append(Tensor(name=f"{name}.bias", rows=rows, role="bias", layer=layer,
                          split="replicated" if split == "row" else split, heads=heads))  # fmt: skip
    return out


def _norm(
    w: WeightShape, name: str, width: int, layer: int | None, *, count: int = 1
) -> list[Tensor]:
    per = 2 if w.norm == "layer" else 1  # LayerNorm: weight + bias
    return [Tensor(name=name, rows=width, copies=count * per, role="norm", layer=layer)]


def _attention(a: AttentionWeights, h: int, p: str, i: int) -> list[Tensor]:
    q_rows = a.num_heads * a.head_dim
    kv_rows = a.num_kv_heads * a.head_dim
    out = _linear(
        f"{p}.q_proj", q_rows * (2 if a.output_gate else 1), h, i, "column", bias=a.qkv_bias
    )
    out += _linear(f"{p}.k_proj", kv_rows, h, i, "kv", bias=a.qkv_bias, heads=a.num_kv_heads)
    out += _linear(f"{p}.v_proj", kv_rows, h, i, "kv", bias=a.qkv_bias, heads=a.num_kv_heads)
    out += _linear(f"{p}.o_proj", h, q_rows, i, "row", bias=a.o_bias)
    if a.qk_norm:
        out.append(Tensor(name=f"{p}.qk_norm", rows=a.head_dim, copies=2, role="norm", layer=i))
    if a.sinks:
        out.append(
            Tensor(name=f"{p}.sinks", rows=a.num_heads, role="vector", layer=i, split="column")
        )
    return out


def _mla(m: MlaWeights, h: int, p: str, i: int) -> list[Tensor]:
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:
        out = _linear(f"{p}.q_a_proj", m.q_lora_rank, h, i, "replicated")
        out.append(Tensor(name=f"{p}.q_a_layernorm", rows=m.q_lora_rank, role="norm", layer=i))
        out += _linear(f"{p}.q_b_proj", m.num_heads * qk_head, m.q_lora_rank, i, "column")
    else:
        out = _linear(f"{p}.q_proj", m.num_heads * qk_head, h, i, "column")
    out += _linear(
        f"{p}.kv_a_proj_with_mqa", m.kv_lora_rank + m.qk_rope_head_dim, h, i, "replicated"
    )
    out.append(Tensor(name=f"{p}.kv_a_layernorm", rows=m.kv_lora_rank, role="norm", layer=i))
    kv_b_rows = m.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
    out += _linear(f"{p}.kv_b_proj", kv_b_rows, m.kv_lora_rank, i, "column")
    out += _linear(f"{p}.o_proj", h, m.num_heads * m.v_head_dim, i, "row")
    return out


def _mlp(m: MlpWeights, h: int, p: str, i: int | None) -> list[Tensor]:
    """gate_proj and up_proj (checkpoints store them apart; vLLM keeps one scale each) + down_proj."""
    inter = m.intermediate_size
    out = _linear(f"{p}.gate_proj", inter, h, i, "column", bias=m.bias) if m.gated else []
    out += _linear(f"{p}.up_proj", inter, h, i, "column", bias=m.bias)
    return out + _linear(f"{p}.down_proj", h, inter, i, "row", bias=m.bias)


def _moe(m: MoeWeights, h: int, p: str, i: int) -> list[Tensor]:
    e, inter = m.num_experts, m.expert_intermediate_size
    up_rows = inter * (2 if m.gated else 1)
    out = [
        Tensor(name=f"{p}.router", rows=e, cols=h, role="router", layer=i),
        Tensor(name=f"{p}.experts.gate_up_proj", rows=up_rows, cols=h, copies=e, expert=True,
               role="linear", layer=i, split="column"),
        Tensor(name=f"{p}.experts.down_proj", rows=h, cols=inter, copies=e, expert=True,
               role="linear", layer=i, split="row"),
    ]  # fmt: skip
    if m.router_bias:
        out.append(Tensor(name=f"{p}.router.bias", rows=e, role="bias", layer=i))
    if m.expert_bias:
        out.append(Tensor(name=f"{p}.experts.gate_up_proj.bias", rows=up_rows, copies=e,
                          expert=True, role="bias", layer=i, split="column"))  # fmt: skip
        out.append(Tensor(name=f"{p}.experts.down_proj.bias", rows=h, copies=e, expert=True,
                          role="bias", layer=i))  # fmt: skip
    if m.shared_intermediate_size:
        shared = MlpWeights(intermediate_size=m.shared_intermediate_size, gated=m.gated)
        out += _mlp(shared, h, f"{p}.shared_experts", i)
    if m.shared_expert_gate:
        out.append(Tensor(name=f"{p}.shared_expert_gate", rows=1, cols=h, role="router", layer=i))
    return out


def _mamba2(m: Mamba2Weights, h: int, p: str, i: int) -> list[Tensor]:
    inter = m.intermediate_size
    # in_proj emits z (gate), x, B, C and dt: 2·inter + 2·groups·state + heads
    in_rows = 2 * inter + 2 * m.n_groups * m.state_size + m.num_heads
    out = _linear(f"{p}.in_proj", in_rows, h, i, "column", bias=m.proj_bias)
    out.append(
        Tensor(
            name=f"{p}.conv1d",
            rows=m.conv_dim,
            cols=m.conv_kernel,
            role="conv",
            layer=i,
            split="column",
        )
    )
    if m.conv_bias:
        out.append(
            Tensor(name=f"{p}.conv1d.bias", rows=m.conv_dim, role="bias", layer=i, split="column")
        )
    out.append(
        Tensor(
            name=f"{p}.dt_A_D", rows=m.num_heads, copies=3, role="vector", layer=i, split="column"
        )
    )
    out.append(Tensor(name=f"{p}.norm", rows=inter, role="norm", layer=i, split="column"))
    return out + _linear(f"{p}.out_proj", h, inter, i, "row", bias=m.proj_bias)


def _gdn(g: GdnWeights, h: int, p: str, i: int) -> list[Tensor]:
    key_dim, value_dim = g.num_k_heads * g.k_head_dim, g.num_v_heads * g.v_head_dim
    out = _linear(f"{p}.in_proj_qkvz", 2 * key_dim + 2 * value_dim, h, i, "column")
    out += _linear(f"{p}.in_proj_ba", 2 * g.num_v_heads, h, i, "column")
    conv_dim = 2 * key_dim + value_dim
    out.append(
        Tensor(
            name=f"{p}.conv1d",
            rows=conv_dim,
            cols=g.conv_kernel,
            role="conv",
            layer=i,
            split="column",
        )
    )
    out.append(
        Tensor(
            name=f"{p}.dt_bias_A_log",
            rows=g.num_v_heads,
            copies=2,
            role="vector",
            layer=i,
            split="column",
        )
    )
    out.append(Tensor(name=f"{p}.norm", rows=g.v_head_dim, role="norm", layer=i))
    return out + _linear(f"{p}.out_proj", h, value_dim, i, "row")


def _vision(v: VisionWeights) -> list[Tensor]:
    """The vision encoder and projector (all on the first pipeline stage)."""
    if v.family == "siglip":
        return [replace(t, vision=True) for t in _siglip(v)]
    if v.family == "pixtral":
        return [replace(t, vision=True) for t in _pixtral(v)]
    hv, p = v.hidden_size, "vision_model"
    patches = (v.image_size // v.patch_size) ** 2
    out = [
        Tensor(name=f"{p}.class_embedding", rows=hv, role="vector"),
        Tensor(name=f"{p}.positional_embedding", rows=patches + 1, cols=hv, role="position"),
        Tensor(name=f"{p}.patch_embedding", rows=hv, cols=v.num_channels * v.patch_size**2,
               role="linear", split="column"),
        Tensor(name=f"{p}.layernorm_pre_post", rows=hv, copies=4, role="norm"),
    ]  # fmt: skip
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=False, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj"):
            out += _linear(f"{q}.self_attn.{proj}", hv, hv, None, "column", bias=True)
        out += _linear(f"{q}.self_attn.o_proj", hv, hv, None, "row", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
        out.append(Tensor(name=f"{q}.layernorms", rows=hv, copies=4, role="norm"))
    shuffled = int(hv / v.pixel_shuffle_ratio**2)
    out += _linear(f"{p}.adapter.fc1", v.projector_input_dim, shuffled, None, "column")
    out += _linear(f"{p}.adapter.fc2", v.projector_output_dim, v.projector_input_dim, None, "row")
    out += _linear(
        "multi_modal_projector",
        v.text_hidden_size,
        v.vision_output_dim,
        None,
        "column",
        bias=v.projector_bias,
    )
    return [replace(t, vision=True) for t in out]


def _siglip(v: VisionWeights) -> list[Tensor]:
    """SigLIP (Gemma 3): biased attention and fc1/fc2 MLP, LayerNorms, a learned position table, and
    Gemma 3's projector (one vision × text matrix and an RMSNorm)."""
    hv, p = v.hidden_size, "vision_tower.vision_model"
    out = [
        Tensor(name=f"{p}.embeddings.patch_embedding", rows=hv, cols=v.num_channels * v.patch_size**2,
               role="linear", split="column"),
        Tensor(name=f"{p}.embeddings.patch_embedding.bias", rows=hv, role="bias"),
        Tensor(name=f"{p}.embeddings.position_embedding", rows=(v.image_size // v.patch_size) ** 2, cols=hv,
               role="position"),
        Tensor(name=f"{p}.post_layernorm", rows=hv, copies=2, role="norm"),
    ]  # fmt: skip
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=False, bias=True)
    for i in range(v.num_layers):
        q = f"{p}.encoder.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj"):
            out += _linear(f"{q}.self_attn.{proj}", hv, hv, None, "column", bias=True)
        out += _linear(f"{q}.self_attn.out_proj", hv, hv, None, "row", bias=True)
        out += _mlp(block, hv, f"{q}.mlp", None)
        out.append(Tensor(name=f"{q}.layer_norms", rows=hv, copies=4, role="norm"))
    out.append(Tensor(name="multi_modal_projector.mm_input_projection_weight", rows=v.text_hidden_size,
                      cols=hv, role="linear"))  # fmt: skip
    out.append(Tensor(name="multi_modal_projector.mm_soft_emb_norm", rows=hv, role="norm"))
    return out


def _pixtral(v: VisionWeights) -> list[Tensor]:
    """Pixtral (Mistral 3): unbiased attention, gated MLP, RMSNorms, no position table (2D RoPE);
    Mistral 3's projector: RMSNorm, patch merger (``n² · h → h``), two linear layers."""
    hv, p, h = v.hidden_size, "vision_tower", v.text_hidden_size
    out = [
        Tensor(name=f"{p}.patch_conv", rows=hv, cols=v.num_channels * v.patch_size**2, role="linear",
               split="column"),
        Tensor(name=f"{p}.ln_pre", rows=hv, role="norm"),
    ]  # fmt: skip
    block = MlpWeights(intermediate_size=v.intermediate_size, gated=True)
    for i in range(v.num_layers):
        q = f"{p}.transformer.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj"):
            out += _linear(f"{q}.attention.{proj}", hv, hv, None, "column")
        out += _linear(f"{q}.attention.o_proj", hv, hv, None, "row")
        out += _mlp(block, hv, f"{q}.feed_forward", None)
        out.append(Tensor(name=f"{q}.norms", rows=hv, copies=2, role="norm"))
    m = "multi_modal_projector"
    out.append(Tensor(name=f"{m}.norm", rows=hv, role="norm"))
    out += _linear(
        f"{m}.patch_merger.merging_layer", hv, hv * v.spatial_merge_size**2, None, "replicated"
    )
    out += _linear(f"{m}.linear_1", h, hv, None, "column", bias=v.projector_bias)
    out += _linear(f"{m}.linear_2", h, h, None, "row", bias=v.projector_bias)
    return out
