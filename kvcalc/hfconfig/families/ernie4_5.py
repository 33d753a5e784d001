"""ERNIE 4.5 dense (``Ernie4_5ForCausalLM``): full attention on every layer.

vLLM 0.33 ``models/ernie45.py`` serves it with its ``LlamaForCausalLM`` (heads ``head_dim`` wide, else
``hidden_size / num_attention_heads``; a window only on layers ``layer_types`` marks sliding, and
ERNIE 4.5 configs have no ``layer_types``). PaddleOCR-VL (``paddleocr_vl``:
``paddleocr_vl.py``) copies its ``text_config`` onto the top-level config and builds it as
``Ernie4_5ForCausalLM``; the SigLIP-type tower and the projector hold no cache.
"""

from kvcalc.hfconfig.family import Family

FAMILIES = (
    Family(
        name="ernie4_5",
        model_types={"ernie4_5", "paddleocr_vl"},
        architectures={"Ernie4_5ForCausalLM", "PaddleOCRVLForConditionalGeneration"},
        note="ERNIE 4.5 dense: full attention per layer",
    ),
)
