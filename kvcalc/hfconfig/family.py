"""What kvcalc knows: one :class:`Family` per architecture family, and the check that refuses the rest.

A config is *verified* when

1. its ``model_type`` belongs to a registered family (:mod:`kvcalc.hfconfig.families`), and, when it
   names ``architectures``, one of them is the family's;
2. every cache-relevant key it carries (:func:`cache_relevant_keys`: heads, head dims, windows, layer
   patterns, latent ranks, indexer, recurrent/SSM/conv state, KV sharing, compression) is one the
   family's reader accounts for (:attr:`Family.keys`, plus :data:`BASE_KEYS`);
3. every ``layer_types`` value is one the family's reader understands (:attr:`Family.layer_types`).

Anything else is refused with ``config-unverified`` naming the model type and the keys: a layout kvcalc
has not been checked against is never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import field
from typing import TYPE_CHECKING, Any, Union

from kvcalc.errors import ConfigError
from kvcalc.frozen import frozen

if TYPE_CHECKING:
    from kvcalc.hfconfig.reader import ConfigReader
    from kvcalc.model.dtypes import CacheDtype
    from kvcalc.model.layouts import Layout

#: Keys every attention reader reads the same way (``kvcalc.hfconfig.generic``).
BASE_KEYS = frozenset({"num_key_value_heads", "head_dim"})

#: Key-name patterns that make a key cache-relevant, with the category named in refusals.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (what, re.compile(pattern))
    for what, pattern in (
        ("KV heads", r"kv_head|head_kv|key_value|kv_channels|query_group|multi_query|"
                     r"new_decoder_architecture|^num_kv|_kv_heads"),
        ("head dims", r"head_dim|head_size"),
        ("windows", r"window|swa|attention_chunk|^chunk_size$"),
        ("layer pattern", r"layer_types|pattern|layers_block_type|layer_period|layer_offset|"
                          r"_interval$|layer_indices|attn_layer|block_configs|no_rope_layers|"
                          r"layers_to_|full_attn_idxs"),
        ("latent rank", r"lora_rank|latent"),
        ("indexer", r"^index_|indexer"),
        ("recurrent/SSM/conv", r"mamba|ssm|conv|state_size|^linear_|recurrent|rwkv|lightning|"
                               r"^n_groups$|^dt_|time_step|^d_state|^expand$|short_conv"),
        ("KV sharing", r"shared_layer|kv_shar|share_kv|cross_attention_layers|^cross_attn|kv_reuse"),
        ("compression", r"compress"),
    )
)  # fmt: skip


def cache_relevant_keys(config: Mapping[str, Any]) -> dict[str, str]:
    """``key -> category`` for the keys of ``config`` (one level) that shape the KV cache."""
    found: dict[str, str] = {}
    for key, value in config.items():
        if value is None or not isinstance(key, str):
            continue
        for what, rule in _RULES:
            if rule.search(key):
                found[key] = what
                break
    return found


@frozen
class LayoutContext:
    """What a family's layout reader gets besides the config reader."""

    num_layers: int
    num_attention_heads: int
    hidden_size: int
    #: the dtype the model is served in (the ``auto`` cache dtype)
    dtype: CacheDtype
    #: ``figure -> sentence`` provenance, filled by the reader for ``inspect --explain``
    provenance: dict[str, str]
    #: query-head counts of layers built with other than ``num_attention_heads`` (Step-3.5's
    #: sliding layers, Laguna's per-layer heads), filled by the reader: TP must divide each
    query_heads: set[int] = field(default_factory=set)
    #: the largest TP size kvcalc plans, with the reason and the refusal's code (Dory: 1, vLLM's
    #: own limit, ``invalid-parallelism``), filled by the reader
    tp_limit: dict[int, tuple[str, str]] = field(default_factory=dict)


#: one layout per layer, or (layouts, layer kinds for the weight count)
LayoutsRead = Union["list[Layout]", "tuple[list[Layout], tuple[str, ...]]"]
#: ``(reader, context) -> one layout per layer`` (optionally with the weight-count kinds)
LayoutReader = Callable[["ConfigReader", LayoutContext], LayoutsRead]


@frozen
class Family:
    """One architecture family kvcalc sizes exactly, and what its reader consumes.

    ``keys`` lists the cache-relevant keys the reader accounts for (reads, or knows to be irrelevant
    to the cache: say why in a comment next to the entry). ``layouts`` is the family's own layout
    reader; ``None`` uses the generic one (:func:`kvcalc.hfconfig.generic.read_layouts`: heads and
    head dims, windows and layer patterns as :mod:`kvcalc.hfconfig.layers` resolves them, MLA,
    Mamba2, Gated DeltaNet).
    """

    name: str
    model_types: AbstractSet[str]
    architectures: AbstractSet[str]
    keys: AbstractSet[str] = frozenset()
    #: accepted ``layer_types`` values
    layer_types: AbstractSet[str] = frozenset()
    layouts: LayoutReader | None = None
    #: one line for ``inspect --explain``: what was checked, against what
    note: str = ""
    #: no attention layer and no ``num_attention_heads`` (pure Mamba): the head count is 0, as
    #: vLLM's ``get_total_num_attention_heads`` defaults it
    attention_free: bool = False
    #: the reader lays out a cache count of its own rather than one per ``num_hidden_layers``
    #: (LongCat-Flash: two MLA attentions per decoder layer, ``num_layers`` in its config)
    own_layer_count: bool = False
    #: the config class's ``attribute_map`` for the canonical keys the generic reader reads
    #: (``num_hidden_layers``, ``num_attention_heads``, ``hidden_size``), where a checkpoint's
    #: config.json may carry only the mapped key (Whisper: ``encoder_layers``, ...); a canonical
    #: key the config carries is read first
    attribute_map: tuple[tuple[str, str], ...] = ()
    #: module that registered it (filled by the registry)
    module: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for name in ("model_types", "architectures", "keys", "layer_types"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise TypeError(f"Family {self.name}: {name} must be a set of strings")
            object.__setattr__(self, name, frozenset(value))

    def mapped(self, key: str) -> tuple[str, ...]:
        """``key``, then the key the config class maps it to (``attribute_map``), if any."""
        return (key, *(to for canonical, to in self.attribute_map if canonical == key))


class UnverifiedConfigError(ConfigError):
    """A config kvcalc has not verified: an unregistered architecture, or keys its reader ignores."""

    code = "config-unverified"

    def __init__(
        self,
        message: str,
        *,
        model_type: str,
        architectures: tuple[str, ...],
        keys: tuple[str, ...],
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.model_type = model_type
        self.architectures = architectures
        self.keys = keys


TRUST_HINT = (
    "kvcalc refuses layouts it has not verified rather than guess; --trust-layout plans it anyway "
    "as plain attention (results marked layout_validated: false)"
)
