"""DeepSeek-V4 (``deepseek_v4``): sliding-window latents, compressed latents, indexer and compressor states.

From ``vllm/transformers_utils/deepseek_v4_utils.py`` and ``vllm/models/deepseek_v4`` (vLLM 0.33.0):
the per-layer compression ratio is ``compress_ratios[i]`` (MTP layers listed last), or
``compress_rates[layer_types[i]]`` in the upstream config format; 0 is a sliding-window-only layer,
4 a compressed layer with an overlapping compressor and an indexer, 128 a compressed layer without.
Every layer keeps a ``sliding_window`` of ``head_dim``-wide latents (one KV head).

The family's weights (:func:`dsv4_weights`, for :mod:`kvcalc.hfconfig.weights`) and its registration
(``FAMILIES``) are here too.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvcalc.errors import ConfigError
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.layers import with_weight_kinds
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.hfconfig.weight_shape_extra import Dsv4Weights
from kvcalc.model.attention_layouts import CompressedSparseAttention
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import Layout

_RATIOS = (0, 4, 128)


def _ratios(r: ConfigReader, num_layers: int, prov: dict[str, str]) -> list[int]:
    ratios = r.list("compress_ratios")
    if ratios is not None:
        where = r.path("compress_ratios")
    else:
        rates = r.mapping("compress_rates")
        types = r.list("layer_types")
        if rates is None or types is None:
            raise r.missing(("compress_ratios", "compress_rates"))
        ratios = [rates.get(t, 0) if isinstance(rates, Mapping) else None for t in types]
        where = "compress_rates[layer_types[i]]"
    if len(ratios) < num_layers or any(v not in _RATIOS or isinstance(v, bool) for v in ratios):
        raise ConfigError(
            f"{r.source}: {where} must give 0, 4 or 128 for each of {num_layers} layers",
            code="config-invalid",
        )
    counts = {v: ratios[:num_layers].count(v) for v in _RATIOS}
    prov["layer pattern"] = (
        f"{where}: {counts[0]} sliding-window-only, {counts[4]} ratio-4 (indexer), "
        f"{counts[128]} ratio-128 layers"
        + (
            f"; {len(ratios) - num_layers} MTP entries not built"
            if len(ratios) > num_layers
            else ""
        )
    )
    return list(ratios[:num_layers])


def read_deepseek_v4(
    r: ConfigReader, num_layers: int, dtype: CacheDtype, prov: dict[str, str]
) -> list[Layout]:
    ratios = _ratios(r, num_layers, prov)
    head = r.int("head_dim")
    window = r.int("sliding_window")
    index = r.int("index_head_dim")
    r.int("qk_rope_head_dim", default=None)
    r.int("num_key_value_heads", default=None)
    prov["attention"] = (
        f"one {head}-wide latent per token (head_dim), sliding_window {window}, "
        f"index_head_dim {index}"
    )
    return [
        CompressedSparseAttention(
            dtype=dtype,
            head_dim=head,
            sliding_window=window,
            compress_ratio=ratio,
            index_head_dim=index,
        )  # fmt: skip
        for ratio in ratios
    ]


def dsv4_weights(r: ConfigReader, n: int) -> Dsv4Weights:
    """DeepSeek-V4's attention blocks; the per-layer compressor from ``compress_ratios`` (0, 4 or
    128, as transformers' DeepseekV4Config maps them to layer types)."""
    ratios = r.index_list("compress_ratios")
    if ratios is None or len(ratios) < n or not set(ratios[:n]) <= {0, 4, 128}:
        raise ConfigError(
            f"{r.source}: DeepSeek-V4 weights need compress_ratios (0, 4 or 128 for each of the "
            f"{n} layers)",
            hint="pass --weights-memory, or plan from a Hub id or folder with safetensors files",
        )
    return Dsv4Weights(
        num_heads=r.int("num_attention_heads"),
        head_dim=r.int("head_dim"),
        q_lora_rank=r.int("q_lora_rank"),
        o_groups=r.int("o_groups"),
        o_lora_rank=r.int("o_lora_rank"),
        index_n_heads=r.int("index_n_heads"),
        index_head_dim=r.int("index_head_dim"),
        hc_mult=r.int("hc_mult", default=1),
        compress_ratios=tuple(ratios[:n]),
    )


def _layouts(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    return with_weight_kinds(read_deepseek_v4(r, ctx.num_layers, ctx.dtype, ctx.provenance))


FAMILIES = (
    Family(
        name="deepseek-v4",
        model_types={"deepseek_v4"},
        architectures={"DeepseekV4ForCausalLM"},
        keys={
            "compress_ratios",
            "compress_rates",
            "layer_types",
            "sliding_window",
            "index_head_dim",
            "qk_rope_head_dim",
            # query/output low-rank projections, the indexer's top-k and heads, the compressor's
            # RoPE base: weights and compute, not cache
            "q_lora_rank",
            "o_lora_rank",
            "index_n_heads",
            "index_topk",
            "compress_rope_theta",
        },  # fmt: skip
        layer_types=frozenset(),
        layouts=_layouts,
        note="compressor, indexer and sliding caches per layer",
    ),
)
