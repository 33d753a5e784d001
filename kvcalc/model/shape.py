"""A model as kvcalc sees it: its layers' cache layouts and the sizes planning needs.

:class:`ModelShape` is built from ``config.json`` by :func:`kvcalc.hfconfig.parse_config` (the
only code that reads config keys) and is frozen; nothing here reads a config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from kvcalc.frozen import frozen
from kvcalc.model.dtypes import CacheDtype
from kvcalc.model.layouts import ATTENTION_KINDS, LayerKind, Layout

if TYPE_CHECKING:  # llama.cpp's graph widths; the drafts, built by the readers of drafting models
    from kvcalc.model.drafts import EagleHead, MtpLayers
    from kvcalc.model.graph_dims import GraphDims


@frozen
class LayerGroup:
    """Consecutive or scattered layers that share one layout (for display)."""

    layout: Layout
    indices: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.indices)


@frozen
class ModelShape:
    """Everything about a model that KV-cache sizing needs. Plain numbers only."""

    name: str
    model_type: str
    architectures: tuple[str, ...] = ()
    layers: tuple[Layout, ...]
    #: the model's own dtype (what ``--kv-cache-dtype auto`` resolves to)
    dtype: CacheDtype
    #: the dtype name as written in config.json (``None`` when absent)
    config_dtype: str | None = None
    num_attention_heads: int
    #: the other query-head counts some layers are built with (Step-3.5's sliding layers, Laguna's
    #: per-layer heads): vLLM's attention asserts TP divides each, as it does ``num_attention_heads``
    layer_query_heads: tuple[int, ...] = ()
    #: the largest TP size planned, the reason and the refusal's code (Dory's ``dory.py``: 1,
    #: ``invalid-parallelism``; Beam: 1, ``unsupported-parallelism``: not checked above it)
    max_tensor_parallel: tuple[int, str, str] | None = None
    hidden_size: int
    #: default context length as vLLM derives it from the config
    max_model_len: int
    #: the config key vLLM derives it from, as its refusal names it (``None``: no key, 2048)
    max_model_len_key: str | None = "max_position_embeddings"
    #: the RoPE ``factor`` vLLM multiplied the config's length by (1.0: none); under
    #: ``--disable-sliding-window`` it scales the window that caps the length too
    max_model_len_rope_factor: float = 1.0
    #: the config's ``use_sliding_window`` is false: its transformers class clears the window
    sliding_window_cleared: bool = False
    #: the engine refuses to start this model as a setting transformed it (vLLM 0.33's
    #: ``--disable-sliding-window`` on a config class that refuses ``sliding_window = None``)
    start_refusal: str | None = None
    #: the top-level ``model_max_length`` of config.json, which vLLM also quotes
    config_model_max_length: int | float | None = None
    #: keys and values read from config.json, and a sentence per derived figure
    config_keys: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, str] = field(default_factory=dict)
    #: weight-related dimensions (``kvcalc.hfconfig.weights.WeightShape``), for parameter counts
    weights: Any = None
    #: the raw ``quantization_config`` of the checkpoint, if any
    quantization: Mapping[str, Any] | None = None
    #: the KV cache dtype the layers currently hold (``None``: the model dtype, i.e. ``auto``)
    cache_dtype: CacheDtype | None = None
    #: image tokens attend bidirectionally (vLLM ``is_mm_prefix_lm``: Gemma 3/4, PaliGemma, ...),
    #: which selects vLLM's mm-prefix attention backends
    mm_prefix_attention: bool = False
    #: ``architectures`` at the top level of config.json (a multimodal wrapper's, where
    #: ``architectures`` above is its text config's), which SGLang's model lists are keyed on
    config_architectures: tuple[str, ...] = ()
    #: the checkpoint's quantization config as vLLM loads it: config.json's top-level
    #: ``quantization_config``, else a ModelOpt ``hf_quant_config.json`` beside it
    checkpoint_quant_config: Mapping[str, Any] | None = None
    #: the registered architecture family that read the layout (``kvcalc.hfconfig.families``)
    family: str | None = None
    #: False when an unverified config was planned anyway as plain attention (``--trust-layout``)
    layout_validated: bool = True
    #: the config keys (or ``model_type``) that kept the layout from being verified
    unverified_keys: tuple[str, ...] = ()
    #: config keys the cache layout did not read
    ignored_keys: tuple[str, ...] = ()
    #: the widths llama.cpp's compute graph is built from (GGUF files; ``None`` from a config)
    graph_dims: GraphDims | None = None
    #: read from a GGUF file's header (llama.cpp's format), not from a ``config.json``
    gguf: bool = False
    #: the ``vision_config``'s ``num_hidden_layers`` and ``hidden_size`` as written (``None`` where
    #: absent; Kimi-K2.5's ``vt_`` spellings), ``None`` without a vision_config — SGLang's
    #: default memory fraction scales with them
    vision_tower: tuple[int | None, int | None] | None = None
    #: the MTP layers vLLM builds as a draft for ``method: mtp`` (``kvcalc.hfconfig.mtp``; None:
    #: not modelled for this model type). Never part of ``layers``: built only with speculation
    mtp: MtpLayers | None = None
    #: an EAGLE-3 head's own fields, when this config can be one (``kvcalc.hfconfig.eagle``)
    eagle: EagleHead | None = None

    # -- derived ----------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def kv_cache_dtype(self) -> CacheDtype:
        return self.cache_dtype or self.dtype

    @property
    def is_mla(self) -> bool:
        return LayerKind.MLA in self.kinds

    @property
    def kinds(self) -> tuple[LayerKind, ...]:
        """Distinct layer kinds in order of first appearance."""
        kinds: tuple[LayerKind, ...] = self.memo(
            ("kinds",), lambda: tuple(dict.fromkeys(layer.kind for layer in self.layers))
        )
        return kinds

    @property
    def attention_kind(self) -> str:
        """A one-word summary for listings: MHA, GQA, MQA, MLA, SWA, hybrid..."""
        kinds = set(self.kinds) - {LayerKind.NONE, LayerKind.SHARED}
        if LayerKind.COMPRESSED in kinds:
            return "compressed sparse MLA"
        if LayerKind.MLA in kinds:
            return "MLA + sparse indexer" if self._sparse_mla else "MLA"
        if LayerKind.RECURRENT in kinds:
            return "hybrid (linear/SSM + attention)"
        attn = [layer for layer in self.layers if layer.kind in ATTENTION_KINDS]
        heads = {layer.num_kv_heads for layer in attn}
        if heads == {1} and self.num_attention_heads > 1:
            base = "MQA"
        elif heads == {self.num_attention_heads}:
            base = "MHA"
        else:
            base = "GQA"
        if LayerKind.CROSS in kinds:
            return f"{base} + cross-attention (encoder-decoder)"
        if kinds == {LayerKind.SLIDING}:
            return f"{base}, sliding window"
        if LayerKind.SLIDING in kinds:
            return f"{base}, interleaved sliding/full"
        if LayerKind.CHUNKED in kinds:
            return f"{base}, chunked local/full"
        return base

    @property
    def _sparse_mla(self) -> bool:
        return any(getattr(layer, "index_head_dim", 0) for layer in self.layers)

    @property
    def bytes_per_token(self) -> int:
        """Every layer counted as if it held every token (the engine-independent figure)."""
        return sum(layer.bytes_per_token for layer in self.layers)

    @property
    def state_bytes_per_sequence(self) -> int:
        return sum(layer.state_bytes for layer in self.layers)

    def bytes_for(self, num_tokens: int) -> int:
        """One sequence of ``num_tokens`` tokens: windows capped, recurrent state added."""
        return sum(layer.bytes_for(num_tokens) for layer in self.layers)

    def groups(self) -> tuple[LayerGroup, ...]:
        """Layers grouped by identical layout, in order of first appearance."""
        found: dict[Layout, list[int]] = {}
        for index, layer in enumerate(self.layers):
            found.setdefault(layer, []).append(index)
        return tuple(LayerGroup(layout=k, indices=tuple(v)) for k, v in found.items())

    # -- transformations --------------------------------------------------------------------
    def memo(self, key: tuple, make):
        """Memoise something derived from this (frozen) instance under ``key`` (a tuple whose first
        item names what is derived): planning derives the same few shapes, kinds and per-layer
        specs many times for one model. What ``make`` returns must not be changed by callers."""
        cache = self.__dict__.setdefault("_derived_cache", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def with_cache_dtype(self, dtype: CacheDtype | None) -> ModelShape:
        """The same model with its KV cache stored as ``dtype`` (``None``: the model dtype)."""
        target = dtype or self.dtype
        return self.memo(
            ("dtype", dtype),
            lambda: replace(
                self,
                layers=tuple(layer.with_dtype(target) for layer in self.layers),
                cache_dtype=dtype,
            ),
        )

    def per_rank(self, tensor_parallel_size: int) -> ModelShape:
        """One tensor-parallel rank's share of every layer."""
        if tensor_parallel_size == 1:
            return self
        return self.memo(
            ("tp", tensor_parallel_size),
            lambda: replace(
                self, layers=tuple(layer.per_rank(tensor_parallel_size) for layer in self.layers)
            ),
        )
