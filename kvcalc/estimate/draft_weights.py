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
  of norms = 1,661,046,944 B; vLLM's own figure is 1,040 B more (the router's
  ``e_score_correction_bias`` and the attention's four fp32 scales, which the target's estimate
  leaves out as well).
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.estimate.tensor_base import Tensor
from kvcalc.estimate.tensors import inventory
from kvcalc.estimate.weights import pricer, weight_shape
from kvcalc.model.shape import ModelShape


def mtp_weight_bytes(
    model: ModelShape, *, tensor_parallel_size: int, dtype: str | None = None,
    quantization: str | None = None,
) -> int:  # fmt: skip
    """Bytes one GPU holds for ``model``'s MTP draft (:attr:`ModelShape.mtp`)."""
    mtp = model.mtp
    if mtp is None or not mtp.layers:
        raise InputError(f"{model.name} has no MTP layers to price", code="weights-unknown")
    shape = weight_shape(model)
    price = pricer(model, shape, dtype=dtype, quantization=quantization)
    tp = tensor_parallel_size
    template = mtp.template_layer % shape.num_layers
    layer = sum(sum(price(t, tp, loaded=True).values())
                for t in inventory(shape) if t.layer == template)  # fmt: skip
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
