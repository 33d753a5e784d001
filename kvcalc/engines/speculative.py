"""Speculative decoding, engine-neutral: the methods, what a person asked, and the resolved draft.

:class:`SpeculativeConfig` is what ``--speculative-config`` / the ``--spec-*`` shorthands say,
checked as vLLM checks the JSON (:func:`kvcalc.engines.vllm.speculative.read_speculative_config`).
:class:`SpeculativeDraft` is the draft an engine builds for it against one target model: the
method, the tokens proposed per step and the draft's own cache layers (a
:class:`~kvcalc.model.shape.ModelShape` in the model dtype; the engine applies the cache dtype and
the draft's tensor parallelism). Pure data.
"""

from __future__ import annotations

from dataclasses import field
from enum import Enum

from kvcalc.frozen import frozen
from kvcalc.model.shape import ModelShape


class SpecMethod(str, Enum):
    """The speculative methods kvcalc sizes (vLLM's ``SpeculativeConfig.method`` spellings)."""

    MTP = "mtp"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    DRAFT_MODEL = "draft_model"
    NGRAM = "ngram"
    SUFFIX = "suffix"

    @property
    def uses_draft_kv(self) -> bool:
        """The draft's attention layers join the KV cache (vLLM ``uses_draft_kv_cache``)."""
        return self in (SpecMethod.MTP, SpecMethod.EAGLE, SpecMethod.EAGLE3, SpecMethod.DRAFT_MODEL)

    @property
    def needs_draft_config(self) -> bool:
        """The draft is its own checkpoint (``model``): an EAGLE head or a draft model."""
        return self in (SpecMethod.EAGLE, SpecMethod.EAGLE3, SpecMethod.DRAFT_MODEL)

    def __str__(self) -> str:
        return str(self.value)


@frozen
class SpeculativeConfig:
    """A speculative-decoding setting as given, key spellings resolved (``None``: not given)."""

    #: None: not given (vLLM: ``draft_model`` when a ``model`` is named, resolved with the draft)
    method: SpecMethod | None = None
    #: the draft: a bundled model, a config path or a Hub id (MTP: the target itself)
    model: str | None = None
    num_speculative_tokens: int | None = None
    draft_tensor_parallel_size: int | None = None
    #: the draft's own KV cache dtype (None: the target's)
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    max_model_len: int | None = None
    #: suffix decoding: the trees' depth, its ``num_speculative_tokens`` when that is not given
    suffix_decoding_max_tree_depth: int | None = None
    #: SGLang: ``--speculative-algorithm`` as given (upper case), ``--speculative-eagle-topk`` and
    #: ``--speculative-num-draft-tokens`` (``num_speculative_tokens`` is ``--speculative-num-steps``)
    algorithm: str | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    #: the keys given, as spelled, for the ``inputs`` of the JSON and for messages
    keys: tuple[str, ...] = ()
    #: the text the setting was given as (``--speculative-config`` JSON), for messages
    text: str = ""
    #: the draft's config (EAGLE head, draft model) as read by :mod:`kvcalc.planning.api`; None
    #: until read, and for MTP and n-gram
    draft: ModelShape | None = field(default=None, compare=False, repr=False)


@frozen
class SpeculativeDraft:
    """The draft an engine builds for a :class:`SpeculativeConfig` against one target."""

    method: SpecMethod
    num_speculative_tokens: int
    #: the draft's cache layers (MTP layers, the EAGLE head's, the draft model's), model dtype;
    #: None for methods without a draft KV cache (n-gram, suffix)
    model: ModelShape | None = None
    #: the draft's tensor-parallel size (vLLM: 1 or the target's)
    tensor_parallel_size: int = 1
    #: the draft's cache dtype as given (None: the target's resolved dtype)
    kv_cache_dtype: str | None = None
    #: the draft architecture the engine builds (``DeepSeekMTPModel``, ``Eagle3LlamaForCausalLM``)
    architecture: str = ""
    #: one line on where the draft came from, for the plan's notes
    source: str = ""
    #: the draft checkpoint's reference (EAGLE head, draft model), None for MTP and n-gram
    reference: str | None = None
    #: the lookahead where the engine's rule is not vLLM's (SGLang: 0, its draft slots are freed
    #: after each verify step); None: :attr:`lookahead_tokens`'s vLLM rule
    lookahead: int | None = None
    #: SGLang's resolved ``speculative_eagle_topk`` and ``speculative_num_draft_tokens`` (None
    #: for vLLM)
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    #: SGLang: ``--speculative-eagle-topk`` as given (None: not given), which its default
    #: attention backend reads before the top-k is resolved
    given_eagle_topk: int | None = None
    #: the draft layers the target's pool prices where the engine's rule is not :attr:`num_layers`
    #: (SGLang: none for a Qwen3-Next / Qwen3.5 NEXTN draft without a draft path); None: those
    pool_layers: int | None = None

    @property
    def num_layers(self) -> int:
        """Draft layers that hold KV cache (0 for n-gram and suffix decoding)."""
        return self.model.num_layers if self.model is not None else 0

    @property
    def lookahead_tokens(self) -> int:
        """KV slots a running request holds past its tokens (vLLM ``num_lookahead_tokens``: k for
        EAGLE, EAGLE-3, MTP and draft models, 0 for n-gram and suffix decoding)."""
        if self.lookahead is not None:
            return self.lookahead
        return self.num_speculative_tokens if self.method.uses_draft_kv else 0
