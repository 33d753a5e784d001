"""Weight bytes per GPU of a speculative draft, as vLLM 0.33 loads it beside the target (pure).

vLLM loads the drafter inside the same ``DeviceMemoryProfiler`` as the target
(``v1/worker/gpu/model_runner.py`` ``load_model``), so its weights are in "Model loading took" and
come out of the KV budget. What a draft adds:

- MTP (``deepseek_mtp.py``, ``qwen3_next_mtp.py``, ``qwen3_5_mtp.py``): per MTP layer the target's
  own decoder layer (priced like the target's layer it repeats), plus the projection of
  [embedding; hidden] (2·hidden → hidden: DeepSeek's ``eh_proj``, a replicated ``nn.Linear`` in
  the model dtype, per MTP layer; Qwen's ``fc``, column-parallel and quantized with the
  checkpoint, once) and three norms (DeepSeek: ``enorm``, ``hnorm``, ``shared_head.norm`` per
  layer; Qwen: ``pre_fc_norm_hidden``, ``pre_fc_norm_embedding``, ``norm``). The embedding and the
  head are the target's (``eagle/utils.py`` ``_should_share``), and the rotary cache is the
  target's own object (``get_rope``'s cache returns the same module for the same parameters).
  DeepSeek-V3 at TP 8: 1,455,483,040 B of decoder layer + 205,520,896 B ``eh_proj`` + 43,008 B
  of norms + 1,040 B of fp32 buffers (the router's ``e_score_correction_bias``, 256 × 4 B, and
  the attention's four scales) = 1,661,047,984 B, vLLM's own figure.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.errors import InputError
from kvcalc.estimate.tensor_base import Tensor
from kvcalc.estimate.tensors import inventory
from kvcalc.estimate.weights import (
    expert_split,
    layer_buffer_bytes,
    pricer,
    weight_bytes,
    weight_shape,
    whole_shared_experts,
)
from kvcalc.model.shape import ModelShape


def mtp_weight_bytes(
    model: ModelShape, *, tensor_parallel_size: int, dtype: str | None = None,
    quantization: str | None = None, moe_ranks: int | None = None, expert_parallel: bool = False,
    shared_experts_whole: bool = False, redundant_experts: int = 0,
) -> int:  # fmt: skip
    """Bytes one GPU holds for ``model``'s MTP draft (:attr:`ModelShape.mtp`).

    The MTP layer's routed experts are split as the target's (``moe_ranks``, ``expert_parallel``:
    see :func:`~kvcalc.estimate.weights.weight_bytes`): vLLM builds the MTP drafter with the
    target's own ``VllmConfig`` (``SpeculativeConfig.apply_draft_overrides``, the draft's parallel
    config is a draft model's only), so its ``FusedMoE`` flattens the same TP × DP group and
    takes the same expert parallelism. DeepSeek-V3 at DP 8 + EP: 32 of the 256 experts and a
    1,024 B ``expert_map`` on each rank. ``shared_experts_whole``: the MTP layer's shared experts
    held whole, as the target's (:func:`~kvcalc.estimate.weights.whole_shared_experts`).
    ``redundant_experts``: EPLB's, which the MTP layer's ``FusedMoE`` takes from the same
    ``VllmConfig`` (DeepSeek-V3 at DP 8 + EP with 32: 4 more experts a rank, 176,203,776 B, and
    32 more ``expert_map`` entries, recorded)."""
    mtp = model.mtp
    if mtp is None or not mtp.layers:
        raise InputError(f"{model.name} has no MTP layers to price", code="weights-unknown")
    shape = weight_shape(model)
    price = pricer(model, shape, dtype=dtype, quantization=quantization)
    tp = tensor_parallel_size
    split = expert_split(moe_ranks or tp, expert_parallel, redundant_experts)
    template = mtp.template_layer % shape.num_layers
    tensors = tuple(t for t in inventory(shape) if t.layer == template)
    if shared_experts_whole:
        tensors = whole_shared_experts(tensors)
    layer = sum(sum((split.price(t, price, loaded=True) if t.expert else price(t, tp, loaded=True)).values())
                for t in tensors)  # fmt: skip
    layer += layer_buffer_bytes(shape, template)  # the attention's scales, the router's bias
    h = shape.hidden_size
    if mtp.projection == "eh_proj":  # nn.Linear: replicated, never quantized
        proj = Tensor(name="eh_proj", rows=h, cols=2 * h, role="vector")
    else:  # ColumnParallelLinear fc, quantized with the checkpoint
        proj = Tensor(name="fc", rows=h, cols=2 * h, role="linear", split="column")
    extra = sum(price(proj, tp, loaded=True).values())
    extra += sum(price(Tensor(name="norm", rows=h, copies=mtp.norms, role="norm"), tp).values())
    count = len(mtp.layers)
    if mtp.projection == "eh_proj":  # DeepSeek: projection and norms in every MTP layer
        return count * (layer + extra)
    return count * layer + extra


def eagle3_weight_bytes(
    head: ModelShape, target: ModelShape, *, tensor_parallel_size: int, target_max_model_len: int,
    dtype: str,
) -> int:  # fmt: skip
    """Bytes one GPU holds for an EAGLE-3 head (``llama_eagle3.py`` ``Eagle3LlamaForCausalLM``), in
    the target's dtype (the draft's ``ModelConfig`` takes it).

    Its decoder layers (the first one's q/k/v read [embedding; hidden], 2·hidden wide) with a third
    norm (``hidden_norm``), ``fc`` (a replicated linear of target_hidden × aux → hidden), the final
    norm; its own ``lm_head`` of ``draft_vocab_size`` rows and the ``draft_id_to_target_id`` int64
    map when that differs from the target's vocabulary (else the target's head, shared); the
    embedding is the target's. Its rotary cache is its own (raised to the target's max_model_len,
    ``_maybe_override_draft_max_position_embeddings``; the head's RoPE parameters are not the
    target's, so ``get_rope`` builds a new one). Llama-3.1-8B's head at TP 1: 587,235,328 B of
    layer, fc and norms + 8,388,608 B of rotary cache + 256,000 B of map + 262,144,000 B of head.
    """
    eagle = head.eagle
    if eagle is None:
        raise InputError(
            f"{head.name} is not an EAGLE-3 head kvcalc can price", code="weights-unknown"
        )
    shape = weight_shape(head)
    price = pricer(head, shape, dtype=dtype, quantization=None)
    tp, h = tensor_parallel_size, shape.hidden_size
    total = 0
    for t in inventory(shape):
        if t.name in ("model.embed_tokens", "lm_head"):
            continue  # the target's embedding; the head is priced below
        if t.layer == 0 and t.name.rsplit(".", 1)[-1] in ("q_proj", "k_proj", "v_proj"):
            t = replace(t, cols=2 * h)  # layer 0 reads [embedding; hidden]
        total += sum(price(t, tp, loaded=True).values())
    total += sum(layer_buffer_bytes(shape, i) for i in range(shape.num_layers))
    target_hidden = eagle.target_hidden_size or h
    fc = Tensor(
        name="model.fc", rows=h, cols=target_hidden * eagle.aux_hidden_states, role="linear"
    )
    norms = (
        shape.num_layers
        + eagle.norm_before_fc * eagle.aux_hidden_states
        + eagle.fc_norm * eagle.aux_hidden_states
    )
    total += sum(price(fc, tp, loaded=True).values())
    total += shape.num_layers * h * price.dtype_bytes  # hidden_norm of each layer
    if eagle.norm_before_fc:
        total += target_hidden * eagle.aux_hidden_states * price.dtype_bytes
    if eagle.fc_norm:
        total += eagle.aux_hidden_states * target_hidden * price.dtype_bytes
    del norms
    vocab = getattr(target.weights, "vocab_size", None)
    draft_vocab = eagle.draft_vocab_size or shape.vocab_size
    if draft_vocab != vocab:
        lm = Tensor(name="lm_head", rows=draft_vocab, cols=h, role="lm_head", split="vocab")
        total += sum(price(lm, tp, loaded=True).values()) + 8 * draft_vocab
    positions = max(shape.rope_cache_positions, target_max_model_len)
    return total + positions * shape.rotary_dim * price.dtype_bytes


def draft_model_weight_bytes(draft: ModelShape, *, tensor_parallel_size: int, dtype: str,
                             quantization: str | None) -> int:  # fmt: skip
    """A draft model's bytes on one GPU: all of it (its own embedding, head and rotary cache), at
    the draft's tensor-parallel size, in the target's dtype."""
    w = weight_bytes(draft, dtype=dtype, quantization=quantization,
                     tensor_parallel_size=tensor_parallel_size)  # fmt: skip
    return w.weights_bytes_per_gpu + w.buffers_bytes_per_gpu
