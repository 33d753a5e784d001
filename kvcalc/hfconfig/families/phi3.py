"""Phi-3, Phi-3.5 and Phi-4 (``Phi3ForCausalLM``, text): one attention cache per layer, every layer
within ``sliding_window`` when the config sets one.

vLLM 0.33 serves ``Phi3ForCausalLM`` with its ``LlamaForCausalLM`` (``models/phi3.py``). ``Phi3Config``
has no ``layer_types``, so ``EngineArgs.create_engine_config`` sets ``CacheConfig.sliding_window`` to
the config's ``sliding_window`` and every attention layer, which has no window of its own, takes it
(``layers/attention/attention.py``): Phi-3-mini-4k slides over 2,047 tokens on every layer, Phi-3.5
and Phi-4-mini over 262,144. Heads are ``head_dim`` wide, else ``hidden_size / num_attention_heads``.

Phi-3-Vision and Phi-3.5-Vision (``phi3_v``, ``Phi3VForCausalLM``: ``phi3v.py``, a remote-code config
class) build the top-level config as ``LlamaForCausalLM`` (the same cache: Phi-3-Vision-128K slides
over 131,072 tokens on every layer); the CLIP tower and projector (``img_processor``, ``embd_layer``)
hold no cache (:mod:`kvcalc.hfconfig.weights_mmremote`).
"""

from __future__ import annotations

from kvcalc.hfconfig import generic
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_phi3_v(r: ConfigReader, ctx: LayoutContext) -> list[Layout]:
    """Phi-3-Vision: the text layers as Phi-3's, once the image embedding vLLM asserts on is one it
    builds (:func:`kvcalc.hfconfig.weights_mmremote.phi3_v_image_embedding`)."""
    from kvcalc.hfconfig.weights_mmremote import phi3_v_image_embedding

    phi3_v_image_embedding(r)
    return generic.read_layouts(r, ctx)


FAMILIES = (
    Family(
        name="phi3",
        model_types={"phi3"},
        architectures={"Phi3ForCausalLM"},
        keys={"sliding_window"},
        note="one cache per layer; sliding_window, when set, on every layer (vLLM 0.33 CacheConfig)",
    ),
    Family(
        name="phi3_v",
        model_types={"phi3_v"},
        architectures={"Phi3VForCausalLM"},
        keys={"sliding_window"},
        layouts=read_phi3_v,
        note="Phi-3's cache (phi3v.py: LlamaForCausalLM); the CLIP tower holds none",
    ),
)
