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

from dataclasses import replace
from typing import TYPE_CHECKING

from kvcalc.estimate.tensor_base import Tensor, _linear, _mlp
from kvcalc.hfconfig.weight_shape import AttentionWeights, MlpWeights, MoeWeights, WeightShape
from kvcalc.model.layouts import RecurrentVariant

if TYPE_CHECKING:  # built only for the families that have them
    from kvcalc.hfconfig.weight_shape_extra import (
        GdnWeights,
        Mamba1Weights,
        Mamba2Weights,
        MlaWeights,
        ShortConvWeights,
    )

#: roles a weight-quantization method may convert (the rest stay in the model dtype)
QUANTIZABLE_ROLES = frozenset({"linear"})


def inventory(w: WeightShape) -> tuple[Tensor, ...]:
    """All tensors of the model transformers builds (MTP layers excluded)."""
    if w.whisper:  # an encoder-decoder: tensors of its own
        from kvcalc.estimate.whisper_tensors import whisper_tensors

        return tuple(whisper_tensors(w.whisper))
    out: list[Tensor] = []
    h = w.hidden_size
    out.append(
        Tensor(
            name="model.embed_tokens", rows=w.vocab_size, cols=h, role="embedding", split="vocab"
        )
    )
    if w.ngram:  # LongCat-Flash-Ngram: the concatenated tables and the stacked projection
        g = w.ngram
        out.append(Tensor(name="model.ngram_embeddings.oe_embedder", rows=g.rows, cols=g.width,
                          role="embedding", split="vocab"))  # fmt: skip
        out.append(Tensor(name="model.ngram_embeddings.oe_projection", rows=g.width, cols=h,
                          copies=g.embedders, role="vector"))  # fmt: skip
    if w.embedding_norm:
        out += _norm(w, "model.embed_layernorm", h, None)
    if w.learned_positions:
        out.append(
            Tensor(name="model.embed_positions", rows=w.learned_positions, cols=h, role="position")
        )
    for i in range(w.num_layers):
        p = f"model.layers.{i}"
        out += _norm(w, f"{p}.input_layernorm", h, i, count=w.norms_per_layer)
        mixer = w.mixers[i] if i < len(w.mixers) else "none"
        if mixer in ("attention", "attention_global") and w.layer_attention:
            out += _attention(w.layer_attention[i], h, f"{p}.self_attn", i)
        elif mixer == "attention" and w.attention:
            out += _attention(w.attention, h, f"{p}.self_attn", i)
        elif mixer == "attention_global" and w.global_attention:
            out += _attention(w.global_attention, h, f"{p}.self_attn", i)
        elif mixer == "dsv4" and w.dsv4:
            from kvcalc.estimate.dsv4_tensors import dsv4_layer  # DeepSeek-V4 only

            out += dsv4_layer(w.dsv4, h, p, i)
        elif mixer == "gemma3n" and w.gemma3n and w.attention:
            from kvcalc.estimate.gemma3n_tensors import gemma3n_layer  # Gemma-3n only

            out += gemma3n_layer(w.gemma3n, w.attention, h, p, i)
        elif mixer == "mla" and w.mla:
            out += _mla(w.mla, h, f"{p}.self_attn", i)
        elif mixer == RecurrentVariant.MAMBA2 and w.mamba2:
            out += _mamba2(w.mamba2, h, f"{p}.mixer", i)
        elif mixer == RecurrentVariant.GATED_DELTANET and w.gdn:
            out += _gdn(w.gdn, h, f"{p}.linear_attn", i)
        elif mixer == RecurrentVariant.KIMI_DELTA and w.kda:
            from kvcalc.estimate.kda_tensors import kda_layer  # Kimi-Linear only

            out += kda_layer(w.kda, h, f"{p}.self_attn", i)
        elif mixer == "zamba2_hybrid" and w.mamba2 and w.zamba2:
            from kvcalc.estimate.zamba2_tensors import zamba2_hybrid  # Zamba2 only

            out += _mamba2(w.mamba2, h, f"{p}.mamba", i) + zamba2_hybrid(w.zamba2, h, p, i)
        elif mixer == RecurrentVariant.PARALLEL and w.attention and w.mamba2:
            out += _attention(w.attention, h, f"{p}.self_attn", i)
            out += _mamba2(w.mamba2, h, f"{p}.mamba", i)
        elif mixer == RecurrentVariant.MAMBA1 and w.mamba1:
            out += _mamba1(w.mamba1, h, f"{p}.mamba", i)
        elif mixer == "short_conv" and w.short_conv:
            out += _short_conv(w.short_conv, h, f"{p}.conv", i)
        ffn = w.ffns[i] if i < len(w.ffns) else "none"
        if ffn == "dense" and w.mlp:
            out += _mlp(w.mlp, h, f"{p}.mlp", i)
            if w.activation_params:
                out.append(Tensor(name=f"{p}.mlp.act_fn", rows=w.activation_params, role="vector",
                                  layer=i))  # fmt: skip
        elif ffn == "moe" and w.moe:
            out += _moe(w.moe, h, f"{p}.mlp", i)
        elif ffn == "dense+moe" and w.mlp and w.moe:  # LongCat-Flash: an MLP beside the MoE
            out += _mlp(w.mlp, h, f"{p}.mlps", i) + _moe(w.moe, h, f"{p}.mlp", i)
    if w.gemma3n:
        from kvcalc.estimate.gemma3n_tensors import gemma3n_model

        out += gemma3n_model(w.gemma3n, h, w.num_layers)
    if w.final_norm:
        out += _norm(w, "model.norm", h, None)
    if w.dsv4 and w.dsv4.hc_mult > 1:  # the head's hyper-connection: fn, base, scale
        m = w.dsv4.hc_mult
        out.append(Tensor(name="model.hc_head.hc_fn", rows=m, cols=m * h, role="vector"))
        out.append(Tensor(name="model.hc_head.hc_base_scale", rows=m + 1, role="vector"))
    if not w.tie_word_embeddings:
        out.append(Tensor(name="lm_head", rows=w.vocab_size, cols=h, role="lm_head", split="vocab"))
    if w.lm_head_bias:
        out.append(Tensor(name="lm_head.bias", rows=w.vocab_size, role="bias", split="vocab"))
    if w.vision:
        from kvcalc.estimate.vision_tensors import vision_tensors  # vision towers only

        out += vision_tensors(w.vision)
    return tuple(out)


def _norm(
    w: WeightShape, name: str, width: int, layer: int | None, *, count: int = 1
) -> list[Tensor]:
    per = 2 if w.norm == "layer" else 1  # LayerNorm: weight + bias
    return [Tensor(name=name, rows=width, copies=count * per, role="norm", layer=layer)]


def _attention(a: AttentionWeights, h: int, p: str, i: int) -> list[Tensor]:
    q_rows = a.num_heads * a.head_dim
    kv_rows = a.num_kv_heads * a.head_dim
    v_rows, o_cols = (
        a.num_kv_heads * (a.v_head_dim or a.head_dim),
        a.num_heads * (a.v_head_dim or a.head_dim),
    )
    if a.q_lora_rank:  # Step3: hidden → share_q_dim (replicated), its norm, → heads (column)
        out = _linear(f"{p}.q_a_proj", a.q_lora_rank, h, i, "replicated")
        out.append(Tensor(name=f"{p}.q_norm", rows=a.q_lora_rank, role="norm", layer=i))
        out += _linear(f"{p}.q_b_proj", q_rows, a.q_lora_rank, i, "column")
    else:
        out = _linear(
            f"{p}.q_proj", q_rows * (2 if a.output_gate else 1), h, i, "column", bias=a.qkv_bias
        )
    out += _linear(f"{p}.k_proj", kv_rows, h, i, "kv", bias=a.qkv_bias, heads=a.num_kv_heads)
    if a.v_proj:
        out += _linear(f"{p}.v_proj", v_rows, h, i, "kv", bias=a.qkv_bias, heads=a.num_kv_heads)
    elif a.v_slot:  # vLLM's qkv_proj keeps the V rows, loaded with K
        out += [replace(t, engine_only=True) for t in _linear(
            f"{p}.v_slot", v_rows, h, i, "kv", bias=a.qkv_bias, heads=a.num_kv_heads)]  # fmt: skip
    out += _linear(f"{p}.o_proj", h, o_cols, i, "row", bias=a.o_bias)
    if a.qk_norm:
        out.append(Tensor(name=f"{p}.qk_norm", rows=a.head_dim, copies=2, role="norm", layer=i))
    if a.qk_norm_full and a.qk_norm_whole:  # over the whole projections, whole on every rank
        out.append(Tensor(name=f"{p}.q_norm", rows=q_rows, role="norm", layer=i))
        out.append(Tensor(name=f"{p}.k_norm", rows=kv_rows, role="norm", layer=i))
    elif a.qk_norm_full:  # over the whole projections (split with them under TP)
        out.append(Tensor(name=f"{p}.q_norm", rows=q_rows, role="norm", layer=i, split="column"))
        out.append(Tensor(name=f"{p}.k_norm", rows=kv_rows, role="norm", layer=i, split="kv",
                          heads=a.num_kv_heads))  # fmt: skip
    if a.head_gate:
        out += _linear(f"{p}.g_proj", a.num_heads, h, i, "column")
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
    if m.index_n_heads:  # DSA indexer: wq_b from the q LoRA, wk, LayerNorm k_norm, weights_proj
        q = f"{p}.indexer"
        out += _linear(f"{q}.wq_b", m.index_n_heads * m.index_head_dim, m.q_lora_rank or h, i,
                       "replicated")  # fmt: skip
        out += _linear(f"{q}.wk", m.index_head_dim, h, i, "replicated")
        # weight and bias of LayerNorm(index_head_dim, dtype=torch.float32) (vLLM 0.33
        # vllm/models/deepseek_v32/attention.py DeepseekV32Indexer): fp32 whatever the model dtype
        out.append(Tensor(name=f"{q}.k_norm", rows=m.index_head_dim, copies=2, role="norm",
                          layer=i, fp32=True))  # fmt: skip
        out += _linear(f"{q}.weights_proj", m.index_n_heads, h, i, "replicated")
    return out


def _moe(m: MoeWeights, h: int, p: str, i: int) -> list[Tensor]:
    e, inter = m.num_experts, m.expert_intermediate_size
    up_rows = inter * (2 if m.gated else 1)
    width = m.latent_size or h  # latent MoE: experts read and write the latent width
    out = [
        Tensor(name=f"{p}.router", rows=e + m.zero_experts, cols=h, role="router", layer=i,
               fp32=m.router_fp32),
        Tensor(name=f"{p}.experts.gate_up_proj", rows=up_rows, cols=width, copies=e, expert=True,
               role="linear", layer=i, split="column",
               min_per_rank=m.min_width_per_rank * (2 if m.gated else 1)),
        Tensor(name=f"{p}.experts.down_proj", rows=width, cols=inter, copies=e, expert=True,
               role="linear", layer=i, split="row", min_per_rank=m.min_width_per_rank),
    ]  # fmt: skip
    if m.latent_size:  # hidden → latent before the experts, latent → hidden after (replicated)
        out += _linear(f"{p}.fc1_latent_proj", m.latent_size, h, i, "replicated")
        out += _linear(f"{p}.fc2_latent_proj", h, m.latent_size, i, "replicated")
    if m.router_bias:
        out.append(Tensor(name=f"{p}.router.bias", rows=e, role="bias", layer=i))
    if m.gemma4_router:  # router.scale, router.per_expert_scale; the block's three norms
        out.append(Tensor(name=f"{p}.router.scale", rows=h, role="vector", layer=i))
        out.append(Tensor(name=f"{p}.router.per_expert_scale", rows=e, role="vector", layer=i))
        out.append(Tensor(name=f"{p}.moe_layernorms", rows=h, copies=3, role="norm", layer=i))
    if m.statics_bias:
        out.append(Tensor(name=f"{p}.moe_statics.e_score_correction_bias", rows=e, role="router",
                          layer=i, fp32=m.router_fp32 or m.statics_fp32))  # fmt: skip
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
    g, g_rows = m.n_groups, 2 * m.state_size  # the groups' B and C rows, replicated under TP
    out = [replace(t, groups=g, group_rows=g_rows) if t.split == "column" else t
           for t in _linear(f"{p}.in_proj", in_rows, h, i, "column", bias=m.proj_bias)]  # fmt: skip
    out.append(
        Tensor(
            name=f"{p}.conv1d",
            rows=m.conv_dim,
            cols=m.conv_kernel,
            role="conv",
            layer=i,
            split="column",
            groups=g,
            group_rows=g_rows,
        )
    )
    if m.conv_bias:
        out.append(Tensor(name=f"{p}.conv1d.bias", rows=m.conv_dim, role="bias", layer=i,
                          split="column", groups=g, group_rows=g_rows))  # fmt: skip
    # dt_bias and D in the model dtype; A in fp32 (vLLM 0.33 mamba_mixer2.py builds it
    # ``torch.empty(num_heads // tp, dtype=torch.float32)``), each split by heads
    out.append(
        Tensor(
            name=f"{p}.dt_bias_D",
            rows=m.num_heads,
            copies=2,
            role="vector",
            layer=i,
            split="column",
        )
    )
    out.append(
        Tensor(name=f"{p}.A", rows=m.num_heads, role="vector", layer=i, split="column", fp32=True)
    )
    if m.gated_norm:
        out.append(Tensor(name=f"{p}.norm", rows=inter, role="norm", layer=i, split="column"))
    return out + _linear(f"{p}.out_proj", h, inter, i, "row", bias=m.proj_bias)


def _mamba1(m: Mamba1Weights, h: int, p: str, i: int) -> list[Tensor]:
    n, s = m.inner, m.state_size
    out = _linear(f"{p}.in_proj", 2 * n, h, i, "column", bias=m.proj_bias)
    out.append(Tensor(name=f"{p}.conv1d", rows=n, cols=m.conv_kernel, role="conv", layer=i,
                      split="column"))  # fmt: skip
    if m.conv_bias:
        out.append(Tensor(name=f"{p}.conv1d.bias", rows=n, role="bias", layer=i, split="column"))
    out += _linear(f"{p}.x_proj", m.dt_rank + 2 * s, n, i, "row")
    out += _linear(f"{p}.dt_proj", n, m.dt_rank, i, "column", bias=True)
    out.append(Tensor(name=f"{p}.A_log", rows=n, cols=s, role="vector", layer=i, split="column"))
    out.append(Tensor(name=f"{p}.D", rows=n, role="vector", layer=i, split="column"))
    if m.dt_b_c_norms:
        out.append(
            Tensor(name=f"{p}.dt_b_c_layernorms", rows=m.dt_rank + 2 * s, role="norm", layer=i)
        )
    return out + _linear(f"{p}.out_proj", h, n, i, "row", bias=m.proj_bias)


def _short_conv(c: ShortConvWeights, h: int, p: str, i: int) -> list[Tensor]:
    out = _linear(f"{p}.in_proj", 3 * h, h, i, "column", bias=c.bias)
    out.append(Tensor(name=f"{p}.conv", rows=h, cols=c.conv_kernel, role="conv", layer=i,
                      split="column"))  # fmt: skip
    if c.bias:
        out.append(Tensor(name=f"{p}.conv.bias", rows=h, role="bias", layer=i, split="column"))
    return out + _linear(f"{p}.out_proj", h, h, i, "row", bias=c.bias)


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
    # dt_bias in the model's dtype; A_log in fp32 (vLLM 0.33 qwen_gdn_linear_attn.py and SGLang
    # 0.5.23 qwen3_5.py create it with dtype=torch.float32)
    out.append(Tensor(name=f"{p}.dt_bias", rows=g.num_v_heads, role="vector", layer=i,
                      split="column"))  # fmt: skip
    out.append(Tensor(name=f"{p}.A_log", rows=g.num_v_heads, role="vector", layer=i,
                      split="column", fp32=g.a_log_fp32))  # fmt: skip
    out.append(Tensor(name=f"{p}.norm", rows=g.v_head_dim, role="norm", layer=i))
    return out + _linear(f"{p}.out_proj", h, value_dim, i, "row")
