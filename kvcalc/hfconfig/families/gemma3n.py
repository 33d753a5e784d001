"""Gemma-3n: sliding/full layers whose last ``num_kv_shared_layers`` reuse earlier layers' caches.

KV sharing (``vllm/model_executor/models/gemma3n.py``, vLLM 0.33.0): the shared layers get no
KV-cache spec and transformers no cache layer, so they are charged nothing; ``num_kv_shared_layers`` is 15
when the config names none.

Weights (``gemma3n_weights``; transformers' Gemma3nTextModel, vLLM's ``Gemma3nDecoderLayer``): the
per-layer MLP widths of an ``intermediate_size`` list (one int: every layer), AltUp
(``altup_num_inputs``, default 4), LAuReL (``laurel_rank``, 64), the per-layer embeddings
(``vocab_size_per_layer_input`` 262,144 rows × layers · ``hidden_size_per_layer_input`` 256) and
the KV-shared layers' q-only attention (transformers and vLLM build no k/v there); one RoPE cache
per distinct layer-type theta (``rope_parameters`` per type, else ``rope_theta`` 1,000,000 and
``rope_local_base_freq`` 10,000), each ``max_position_embeddings`` × ``head_dim``.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._gemma_layers import layer_types, shared_sources
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import Gemma3nWeights
from kvcalc.model.attention_layouts import SharedKV
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import FullAttention, Layout, SlidingWindow


def read_gemma3n(
    r: ConfigReader, num_layers: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    kinds = layer_types(r, num_layers, prov)
    kv = r.int("num_key_value_heads")
    head = r.int("head_dim")
    window = r.int("sliding_window")
    prov["attention"] = f"num_key_value_heads {kv} × head_dim {head}, sliding_window {window}"
    shared = shared_sources(r, kinds, 15, prov)
    out: list[Layout] = []
    for i, kind in enumerate(kinds):
        if i in shared:
            out.append(SharedKV(dtype=dtype, source_layer=shared[i]))
        elif kind == L.SLIDING:
            out.append(
                SlidingWindow(
                    dtype=dtype, kv_heads=kv, k_dim=head, v_dim=head, sliding_window=window
                )
            )
        else:
            out.append(FullAttention(dtype=dtype, kv_heads=kv, k_dim=head, v_dim=head))
    return out


def gemma3n_weights(r: ConfigReader, num_layers: int) -> Gemma3nWeights:
    """Gemma-3n's per-layer MLP widths, AltUp, LAuReL and per-layer embedding dimensions; the
    multimodal checkpoint's MobileNet vision and Conformer audio towers are refused, not guessed."""
    towers = [k for k in ("vision_config", "audio_config") if r.raw.get(k) is not None]
    if towers:
        raise ConfigError(
            f"{r.source}: Gemma-3n with {' and '.join(towers)}: its towers' weights are not "
            "counted from config.json (the text model's are)",
            hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
        )
    sizes = r.int_or_list("intermediate_size", num_layers)
    if sizes is None:
        raise r.missing(("intermediate_size",))
    shared = r.int("num_kv_shared_layers", default=15, minimum=0)
    return Gemma3nWeights(
        intermediate_sizes=sizes,
        altup_num_inputs=r.int("altup_num_inputs", default=4),
        laurel_rank=r.int("laurel_rank", default=64),
        per_layer_width=r.int("hidden_size_per_layer_input", default=256),
        per_layer_vocab=r.int("vocab_size_per_layer_input", default=262_144),
        first_kv_shared=num_layers - shared,
    )


#: transformers' Gemma3nTextConfig ``default_theta``: full and sliding layers
_THETA: dict[object, tuple[str, float]] = {
    L.FULL: ("rope_theta", 1_000_000.0),
    L.SLIDING: ("rope_local_base_freq", 10_000.0),
}
_TYPE_NAMES: dict[object, str] = {L.FULL: "full_attention", L.SLIDING: "sliding_attention"}


def gemma3n_rope_rows(r: ConfigReader, num_layers: int) -> int:
    """Rows of vLLM's RoPE caches: ``max_position_embeddings`` per distinct layer-type theta
    (``get_rope`` keeps one cache per set of parameters); scaled RoPE is refused, not guessed."""
    kinds = layer_types(r, num_layers, {})
    nested = r.mapping("rope_parameters") or {}
    thetas = set()
    for kind in set(kinds):
        if kind not in _THETA:  # layer_types reads only sliding and full layers
            raise r.bad(r.path("layer_types"), kind, "sliding or full attention")
        params = nested.get(_TYPE_NAMES[kind], {})
        if (
            not isinstance(params, dict)
            or params.get("rope_type", "default") != "default"
            or (r.has("rope_scaling") and kind == L.FULL)
        ):
            raise ConfigError(
                f"{r.source}: Gemma-3n with scaled RoPE: its RoPE cache is not counted",
                hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
            )
        key, default = _THETA[kind]
        thetas.add(params.get("rope_theta", r.value(key, default)))
    return r.int("max_position_embeddings") * len(thetas)


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return with_weight_kinds(read_gemma3n(r, ctx.num_layers, ctx.dtype, ctx.provenance))


FAMILIES = (
    Family(
        name="gemma3n",
        model_types={"gemma3n", "gemma3n_text"},
        architectures={"Gemma3nForConditionalGeneration", "Gemma3nForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "num_kv_shared_layers",
            # which MLP activations are sparsified per layer: compute, not cache
            "activation_sparsity_pattern",
            # weights: AltUp, LAuReL, per-layer embeddings (gemma3n_weights)
            "altup_num_inputs",
            "laurel_rank",
            "hidden_size_per_layer_input",
            "vocab_size_per_layer_input",
        },  # fmt: skip
        layer_types={"sliding_attention", "full_attention"},
        layouts=_layouts,
        note="KV sharing: shared layers hold no cache of their own",
    ),
)
