"""GLM-4 (``glm-4-9b-chat-hf``: ``GlmForCausalLM``) and GLM-4-0414 / GLM-Z1 (``Glm4ForCausalLM``): full
attention on every layer, ``head_dim`` from config.json (else ``hidden_size / num_attention_heads``).

vLLM 0.33: ``Glm4ForCausalLM`` is ``models/glm4.py`` (no window); ``GlmForCausalLM`` has no vLLM model
file and is served by the Transformers modeling backend (``registry.py`` ``_TRANSFORMERS_BACKEND_MODELS``),
whose attention layers hold the same per-layer cache.

GLM-4.1V (``glm4v``: ``Glm4vForConditionalGeneration``): vLLM 0.33's ``glm4_1v.py`` builds its
``text_config`` as ``Glm4ForCausalLM`` (``architectures=["Glm4ForCausalLM"]``), the same cache; the
vision tower holds none. GLM-OCR (``glm_ocr``: ``GlmOcrForConditionalGeneration``, ``glm_ocr.py``)
is GLM-4.1V's class with its own tower: the same text stack on its ``glm_ocr_text`` config.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="glm4",
        model_types={"glm", "glm4", "glm4v", "glm_ocr"},
        architectures={
            "GlmForCausalLM",
            "Glm4ForCausalLM",
            "Glm4vForConditionalGeneration",
            "GlmOcrForConditionalGeneration",
        },
        note="full attention per layer (GLM-4, GLM-4-0414, GLM-Z1, GLM-4.1V's and GLM-OCR's text stack)",
    ),
)
