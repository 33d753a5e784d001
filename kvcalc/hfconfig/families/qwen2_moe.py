"""Qwen1.5-MoE / Qwen2-57B-A14B (``Qwen2MoeForCausalLM``): full attention on every layer.

vLLM 0.33 ``models/qwen2_moe.py`` builds every attention layer without a window and with heads
``hidden_size / num_attention_heads`` wide: ``use_sliding_window``, ``sliding_window``,
``max_window_layers`` and the ``layer_types`` transformers derives from them are read by no vLLM code
(Qwen2-MoE checkpoints ship ``use_sliding_window: false`` anyway). ``sliding_window`` is read
where ``use_sliding_window`` is true all the same: vLLM's ``ModelConfig`` caps the length at it
under ``--disable-sliding-window`` (recorded, ``qwen_use_sliding_window.json``).
"""

from __future__ import annotations

from kvcalc.hfconfig.families._plain import full_split_heads
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout


def read_qwen2_moe(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    keys = [k for k in ("use_sliding_window", "sliding_window", "max_window_layers") if r.has(k)]
    if r.bool("use_sliding_window", False) and r.has("sliding_window"):
        r.int("sliding_window", default=0, minimum=0)  # the length cap of --disable-sliding-window
    note = "Qwen2-MoE: every layer full attention" + (
        f" ({', '.join(keys)} not read: vLLM 0.33 qwen2_moe.py applies no window)" if keys else ""
    )
    return full_split_heads(r, ctx, "qwen2_moe.py", note)


FAMILIES = (
    Family(
        name="qwen2-moe",
        model_types={"qwen2_moe"},
        architectures={"Qwen2MoeForCausalLM"},
        # read by no vLLM code: see read_qwen2_moe
        keys={"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"},
        layer_types={"full_attention", "sliding_attention"},
        layouts=read_qwen2_moe,
        note="full attention per layer; Qwen2 window keys not applied (vLLM 0.33 qwen2_moe.py)",
    ),
)
