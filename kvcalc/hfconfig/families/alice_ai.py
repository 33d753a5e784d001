"""AliceAI (``AliceAIForCausalLM``, ``alice_ai``): vLLM 0.33 ``models/alice_ai.py``, KDA linear
attention and gated full attention per ``layer_types``; its config class is the checkpoints'
remote code (``families/_remote.py``).

A ``linear_attention`` layer is Kimi's KDA (``KimiGatedDeltaNetAttention`` over the flat
``linear_*`` keys): conv and float32 recurrent states of ``linear_num_key_heads`` heads
``linear_key_head_dim`` wide with ``linear_conv_kernel_dim`` (``kda_state_shape``; the value heads
and widths must equal them, else ``ValueError``: refused); a ``full_attention`` layer is
Qwen3-Next's gated attention, ``num_key_value_heads`` KV heads ``head_dim`` wide. The keys are read
as attributes (config.json must carry them); the AttnRes grouping and the MoE shape no cache.
vLLM refuses a config without ``kda_allow_negative_eigenvalues`` false, ``router_score_function``
sigmoid and ``router_bias_correction`` true (``models/config.py``), and so does kvcalc.
Weights are not counted from config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._remote import required
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.dtypes import FP32
from kvcalc.model.layouts import FullAttention, Layout
from kvcalc.model.recurrent_layouts import KimiDeltaState

_TYPES = ("linear_attention", "full_attention")
#: what vLLM's AliceAIForCausalLMConfig requires before building the model
_REQUIRED = (
    ("kda_allow_negative_eigenvalues", False),
    ("router_score_function", "sigmoid"),
    ("router_bias_correction", True),
)


def read_alice_ai(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    # vLLM 0.33 models/config.py AliceAIForCausalLMConfig refuses any other values
    for key, want in _REQUIRED:
        if r.value(key) != want:
            raise ConfigError(
                f"{r.source}: {key} is not {want!r}: vLLM 0.33 refuses AliceAI without it "
                "(AliceAIForCausalLMConfig.verify_and_update_model_config)",
                code="config-invalid",
            )
    types = r.list("layer_types")
    if types is None or len(types) != n or any(t not in _TYPES for t in types):
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as linear_attention or full_attention "
            "(vLLM 0.33 alice_ai.py reads config.layer_types[i])",
            code="config-invalid",
        )
    f = "alice_ai.py"
    heads, width = required(r, "linear_num_key_heads", f), required(r, "linear_key_head_dim", f)
    if (required(r, "linear_num_value_heads", f), required(r, "linear_value_head_dim", f)) != (
        heads,
        width,
    ):
        raise ConfigError(
            f"{r.source}: linear_num_value_heads / linear_value_head_dim differ from the key "
            "heads: vLLM 0.33 alice_ai.py refuses it (ValueError: AliceAI KDA requires matching "
            "key/value head counts and dimensions)",
            code="config-invalid",
        )
    kernel = required(r, "linear_conv_kernel_dim", f)
    kv, head_dim = required(r, "num_key_value_heads", f), required(r, "head_dim", f)
    state = KimiDeltaState(dtype=ctx.dtype, ssm_dtype=FP32, conv_kernel=kernel, num_heads=heads,
                           head_dim=width)  # fmt: skip
    full = FullAttention(dtype=ctx.dtype, kv_heads=kv, k_dim=head_dim, v_dim=head_dim)
    prov["layer pattern"] = (
        f"layer_types: {types.count('linear_attention')} KDA, {types.count('full_attention')} "
        "full attention (alice_ai.py)"
    )
    prov["kda"] = (
        f"linear_num_key_heads {heads} × linear_key_head_dim {width}, linear_conv_kernel_dim "
        f"{kernel}; recurrent state float32 (vLLM's auto for KDA), conv state the model dtype"
    )
    prov["num_kv_heads"] = f"num_key_value_heads = {kv} on the full-attention layers"
    layouts: list[Layout] = [state if t == "linear_attention" else full for t in types]
    return layouts, (L.UNCOUNTED,) * n


FAMILIES = (
    Family(
        name="alice-ai",
        model_types={"alice_ai"},
        architectures={"AliceAIForCausalLM"},
        keys={
            "layer_types",
            "linear_num_key_heads",
            "linear_num_value_heads",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_conv_kernel_dim",
            "block_attn_res_block_size",  # AttnRes grouping of the residual stream: no cache
        },
        layer_types=set(_TYPES),
        layouts=read_alice_ai,
        note="AliceAI: KDA and gated full attention per layer_types (vLLM 0.33 alice_ai.py).",
    ),
)
