"""H2OVL (``h2ovl_chat``, ``H2OVLChatModel``): InternVL chat's structure on a Llama text model.

vLLM 0.33: ``h2ovl.py`` subclasses ``internvl.py``'s ``InternVLChatModel``; the text model is the
``llm_config``'s Llama (its layers: :func:`kvcalc.hfconfig.generic.read_layouts`), the tower
InternViT and ``mlp1`` (:func:`kvcalc.hfconfig.weights_vision._internvl_chat`).
"""

from kvcalc.hfconfig import generic
from kvcalc.hfconfig.family import Family, LayoutContext, LayoutsRead
from kvcalc.hfconfig.reader import ConfigReader


def read_h2ovl(r: ConfigReader, ctx: LayoutContext) -> LayoutsRead:
    """The InternVL keys ``internvl.py`` reads, a Llama text. Its processor also reads
    ``use_msac`` (multi-scale crops: the image tokens, not the cache or the weights); vLLM builds
    a config without it (recorded), and so does kvcalc."""
    generic.check_internvl_chat(r, what="H2OVL", text_types=("llama",))
    return generic.read_layouts(r, ctx)


FAMILIES = (
    Family(
        name="h2ovl",
        model_types={"h2ovl_chat"},
        architectures={"H2OVLChatModel"},
        layouts=read_h2ovl,
        note="InternVL chat's tower on a Llama text model: the Llama's layers",
    ),
)
