"""Speculative drafts as a config describes them: the MTP layers a checkpoint ships, as vLLM builds
them as a draft, and what an EAGLE-3 head's own config adds to its decoder layer.

:class:`MtpLayers` is filled by :mod:`kvcalc.hfconfig.mtp` (the only code that reads the keys) and
carried on :attr:`kvcalc.model.shape.ModelShape.mtp`; speculative decoding with ``method: mtp`` adds
its :attr:`~MtpLayers.layers` to the KV cache and its weights to the weights term. Without
speculative decoding nothing here is built (vLLM skips the ``model.layers.{L}`` MTP weights).
"""

from __future__ import annotations

from kvcalc.frozen import frozen
from kvcalc.model.layouts import Layout


@frozen
class MtpLayers:
    """The draft vLLM builds from the target's own checkpoint for ``method: mtp``."""

    #: vLLM's ``n_predict`` for the draft config (None where vLLM reads none: Qwen3-Next has no
    #: ``num_nextn_predict_layers``, so ``num_speculative_tokens`` must be given)
    n_predict: int | None
    #: the cache layout of each MTP layer vLLM builds (the count may differ from n_predict:
    #: Qwen3-Next builds 1 layer without the key)
    layers: tuple[Layout, ...]
    #: the config key the count came from, for messages
    key: str
    #: the draft architecture vLLM builds (``DeepSeekMTPModel``, ``Qwen3NextMTP``...)
    architecture: str
    #: the projection of [embedding; hidden state] (2·hidden → hidden): ``eh_proj`` (DeepSeek, a
    #: replicated ``nn.Linear`` in the model dtype) or ``fc`` (Qwen, column-parallel)
    projection: str = "eh_proj"
    #: norms of one MTP layer beside its decoder layer (DeepSeek: enorm, hnorm, shared_head.norm)
    norms: int = 3
    #: the decoder layer of the target whose weights an MTP layer repeats
    template_layer: int = -1


@frozen
class EagleHead:
    """What an EAGLE-3 head's own config says beyond its decoder layer (``llama_eagle3.py``)."""

    #: rows of its own lm_head (None: the vocabulary, shared with the target's head)
    draft_vocab_size: int | None = None
    #: width of the target's hidden states fed to ``fc`` (None: the head's hidden size)
    target_hidden_size: int | None = None
    #: how many target hidden states ``fc`` fuses (3 by default)
    aux_hidden_states: int = 3
    fc_norm: bool = False
    norm_before_fc: bool = False
