"""SGLang 0.5.23's speculative decoding: ``--speculative-algorithm`` and its step/topk/draft-token
settings read as SGLang reads them, and the draft it sizes the KV pool for.

From ``sglang/srt/arg_groups/speculative_hook.py``:

- ``_resolve_speculative_algorithm_alias``: ``NEXTN`` is ``EAGLE`` (Gemma-4 assistant drafts
  become ``FROZEN_KV_MTP``, not modelled);
- ``_handle_eagle_family`` (EAGLE, EAGLE3, STANDALONE): ``max_running_requests`` 48 unless given;
  DeepSeek-V3/V3.2/V4, GLM-4.5/5, Bailing, Mistral-Large-3, HY-V3/V4 and Qwen4-Exp get
  ``speculative_draft_model_path = model_path`` (their MTP layers); without
  ``--speculative-num-steps`` the topk and draft tokens must be unset and
  ``_auto_choose_speculative_params`` picks (steps, topk, draft tokens): STANDALONE (3, 1, 4),
  ``LlamaForCausalLM`` and Grok (5, 4, 8), the rest (3, 1, 4); topk 1 sets draft tokens to
  steps + 1;
- ``_handle_ngram``: ``max_running_requests`` 48, topk = ``--speculative-ngram-max-bfs-breadth``
  (10), draft tokens 12, steps = draft tokens // topk; with DP attention SGLang refuses it (and
  STANDALONE).

The draft's layers (``model_executor/model_runner_components/spec_aux_hidden_state.py``
``_resolve_eagle_aux_hidden_state``): the draft config's ``num_nextn_predict_layers`` where set,
else ``max(num_hidden_layers, num_attention_layers)`` of the draft; the pool prices each at the
target's per-layer bytes (:mod:`~kvcalc.engines.sglang.pools`).

Qwen3-Next and Qwen3.5 (Gated DeltaNet hybrids): NEXTN/EAGLE without a draft path is not refused
by SGLang (``ModelConfig.from_server_args`` falls back to the target's own path) and the draft
worker reads the target rewritten to its MTP form (``Qwen3NextForCausalLMMTP`` /
``Qwen3_5ForCausalLMMTP``, ``num_nextn_predict_layers = 1``); the target's pool prices the target's
own ``num_nextn_predict_layers``, which these configs do not carry, so no draft layer is added to
the cell (given the checkpoint as the draft path, the rewritten one: 1 layer). The state pool
reserves the intermediate SSM state of every draft token first (:mod:`~kvcalc.engines.sglang.mamba`;
NGRAM's 12 draft tokens too).

Not modelled, refused by name: DFLASH/DSPARK/UNO/FROZEN_KV_MTP, EAGLE-1 heads, other hybrid
targets and EAGLE3/STANDALONE drafts on hybrids (not recorded), hybrid-SWA draft layers, DSA
targets (the draft indexer priced apart), pipeline parallelism.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.speculative import SpecMethod, SpeculativeConfig, SpeculativeDraft
from kvcalc.errors import InputError
from kvcalc.model.layouts import WINDOWED_KINDS, LayerKind
from kvcalc.model.shape import ModelShape

CODE = "invalid-speculative-config"
NOT_MODELLED = "speculative-not-modelled"

#: ``--speculative-algorithm`` values kvcalc sizes, and the method each is
MODELLED = {"EAGLE": SpecMethod.EAGLE, "NEXTN": SpecMethod.EAGLE, "EAGLE3": SpecMethod.EAGLE3,
            "STANDALONE": SpecMethod.DRAFT_MODEL, "NGRAM": SpecMethod.NGRAM}  # fmt: skip
#: SGLang 0.5.23's other algorithms (``SpeculativeAlgorithm``): their drafts are priced by rules
#: kvcalc does not model (DFLASH's own draft cell, ``mem_cache/draft_kv_budget.py``)
UNMODELLED = ("DFLASH", "DSPARK", "UNO", "FROZEN_KV_MTP")
#: ``_handle_eagle_family``: targets whose draft path defaults to the model path (their MTP layers)
AUTO_DRAFT_ARCHITECTURES = frozenset((
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
    "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "HYV3ForCausalLM", "HYV4ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
))  # fmt: skip
#: hybrids whose draft-mode ``ModelConfig`` is the checkpoint's own MTP layer
#: (``configs/model_config.py``: ``num_nextn_predict_layers = 1``), and whose state split under
#: speculative decoding is recorded
HYBRID_MTP_ARCHITECTURES = frozenset((
    "Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
))  # fmt: skip
#: ``_auto_choose_speculative_params``: architectures with (5, 4, 8)
_WIDE = frozenset(("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"))
#: ``speculative_ngram_max_bfs_breadth`` default (``arg_groups/fields/spec.py``)
NGRAM_MAX_BFS_BREADTH = 10


def read_speculative(
    algorithm: str | None, draft_path: str | None, num_steps: int | None,
    eagle_topk: int | None, num_draft_tokens: int | None,
) -> SpeculativeConfig | None:  # fmt: skip
    """``--speculative-algorithm`` with its settings, as given; None without an algorithm."""
    if algorithm is None:
        given = [n for n, v in (("--speculative-draft-model-path", draft_path),
                                ("--speculative-num-steps", num_steps),
                                ("--speculative-eagle-topk", eagle_topk),
                                ("--speculative-num-draft-tokens", num_draft_tokens)) if v is not None]  # fmt: skip
        if given:
            raise InputError(f"{', '.join(given)} without --speculative-algorithm: SGLang runs no "
                             "speculative decoding", hint="give --speculative-algorithm",
                             code=CODE)  # fmt: skip
        return None
    name = str(algorithm).strip().upper()
    if name in UNMODELLED:
        raise InputError(f"--speculative-algorithm {name}: not modelled by kvcalc (its draft is "
                         "priced by rules kvcalc does not read)",
                         hint="modelled: " + ", ".join(MODELLED), code=NOT_MODELLED)  # fmt: skip
    if name not in MODELLED:
        raise InputError(f"Unknown speculative algorithm name: {algorithm} (SGLang 0.5.23 refuses "
                         "it)", hint="SGLang's: " + ", ".join((*MODELLED, *UNMODELLED)),
                         code=CODE)  # fmt: skip
    method = MODELLED[name]
    if method is SpecMethod.EAGLE and draft_path is None:
        method = SpecMethod.MTP  # the target's own MTP layers, where SGLang names the model
    for flag, value in (("--speculative-num-steps", num_steps),
                        ("--speculative-eagle-topk", eagle_topk),
                        ("--speculative-num-draft-tokens", num_draft_tokens)):  # fmt: skip
        if value is not None and (type(value) is not int or value < 1):
            raise InputError(f"{flag} must be a positive integer, got {value}", code=CODE)
    keys = tuple(k for k, v in (("speculative_algorithm", name),
                                ("speculative_draft_model_path", draft_path),
                                ("speculative_num_steps", num_steps),
                                ("speculative_eagle_topk", eagle_topk),
                                ("speculative_num_draft_tokens", num_draft_tokens)) if v is not None)  # fmt: skip
    return SpeculativeConfig(method=method, model=draft_path, num_speculative_tokens=num_steps,
                             algorithm=name, eagle_topk=eagle_topk,
                             num_draft_tokens=num_draft_tokens, keys=keys,
                             text=f"--speculative-algorithm {name}")  # fmt: skip


def resolved_params(cfg: SpeculativeConfig, target: ModelShape) -> tuple[int, int, int]:
    """(steps, topk, draft tokens) as ``_handle_eagle_family`` / ``_handle_ngram`` resolve them."""
    steps, topk, tokens = cfg.num_speculative_tokens, cfg.eagle_topk, cfg.num_draft_tokens
    if cfg.method is SpecMethod.NGRAM:
        topk = NGRAM_MAX_BFS_BREADTH  # the BFS breadth, whatever --speculative-eagle-topk says
        tokens = 12 if tokens is None else tokens
        return (tokens // topk if steps is None else steps), topk, tokens
    if steps is None:
        if topk is not None or tokens is not None:  # SGLang asserts both are unset
            raise InputError("--speculative-eagle-topk / --speculative-num-draft-tokens without "
                             "--speculative-num-steps: SGLang 0.5.23 fails an assertion",
                             hint="give --speculative-num-steps too, or none of the three",
                             code=CODE)  # fmt: skip
        arch = (target.architectures or ("",))[0]
        wide = cfg.method is not SpecMethod.DRAFT_MODEL and arch in _WIDE
        steps, topk, tokens = (5, 4, 8) if wide else (3, 1, 4)
    if topk is None or tokens is None:
        raise InputError("--speculative-num-steps needs --speculative-eagle-topk and "
                         "--speculative-num-draft-tokens (SGLang compares them unset)",
                         hint="give all three, or none", code=CODE)  # fmt: skip
    if topk == 1:
        tokens = steps + 1
    return steps, topk, tokens


def sglang_draft(
    target: ModelShape, cfg: SpeculativeConfig, draft: ModelShape | None, *,
    tensor_parallel_size: int, pipeline_parallel_size: int,
) -> SpeculativeDraft:  # fmt: skip
    """The draft SGLang 0.5.23 sizes the pool for (``draft``: the draft path's config, read by the
    caller)."""
    if pipeline_parallel_size > 1:
        raise InputError("SGLang speculative decoding with pipeline parallelism is not modelled",
                         hint="plan it with --pp-size 1", code=NOT_MODELLED)  # fmt: skip
    _refuse_target(target, cfg)
    steps, topk, tokens = resolved_params(cfg, target)
    said = f"{steps} step(s), topk {topk}, {tokens} draft token(s)"
    common = SpeculativeDraft(method=SpecMethod.NGRAM, num_speculative_tokens=steps,
                              tensor_parallel_size=tensor_parallel_size, lookahead=0,
                              eagle_topk=topk, num_draft_tokens=tokens,
                              given_eagle_topk=cfg.eagle_topk,
                              source=f"NGRAM: no draft model, no draft KV cache ({said})")  # fmt: skip
    method = cfg.method or SpecMethod.NGRAM
    if method is SpecMethod.NGRAM:
        return common
    if method is SpecMethod.EAGLE and draft is not None and _same_checkpoint(target, draft):
        method = SpecMethod.MTP
    if method is SpecMethod.MTP:
        return _mtp(target, cfg, said, common)
    if draft is None:
        raise InputError(f"the draft {cfg.model!r} was not read", hint="plan through "
                         "kvcalc.planning.api, which reads the draft's config", code="internal")  # fmt: skip
    if method is SpecMethod.EAGLE:
        raise InputError(f"--speculative-algorithm EAGLE with the head {cfg.model}: EAGLE-1 heads "
                         "are not modelled by kvcalc", hint="EAGLE3 heads, STANDALONE draft models, "
                         "the target's own MTP layers (NEXTN) and NGRAM are", code=NOT_MODELLED)  # fmt: skip
    if method is SpecMethod.EAGLE3 and draft.eagle is None:
        raise InputError(f"{cfg.model} is not an EAGLE-3 head kvcalc sizes (a Llama-type head; it "
                         f"has {draft.model_type!r}, {draft.architectures})", code=NOT_MODELLED)  # fmt: skip
    if any(x.kind is not LayerKind.FULL for x in draft.layers):
        raise InputError(f"the draft {cfg.model} has layers other than full attention, which "
                         "kvcalc does not size as SGLang draft layers", code=NOT_MODELLED)  # fmt: skip
    arch = (draft.architectures or ("",))[0]
    what = "EAGLE3 head" if method is SpecMethod.EAGLE3 else "STANDALONE draft model"
    return replace(common, method=method, model=draft, architecture=arch, reference=cfg.model,
                   source=f"{what} {cfg.model}: {draft.num_layers} layer(s) ({said})")  # fmt: skip


def _refuse_target(target: ModelShape, cfg: SpeculativeConfig) -> None:
    from kvcalc.engines.sglang import layers, mamba

    if mamba.is_hybrid(target):
        arch = (target.architectures or ("",))[0]
        if arch not in HYBRID_MTP_ARCHITECTURES:
            raise InputError(f"SGLang speculative decoding on the hybrid {arch or target.name} is "
                             "not modelled: its Mamba-state split under speculation (the "
                             "intermediate SSM state of every draft token) is recorded for "
                             "Qwen3-Next and Qwen3.5 only",
                             hint="plan it with --engine vllm", code=NOT_MODELLED)  # fmt: skip
        if cfg.method not in (SpecMethod.EAGLE, SpecMethod.MTP, SpecMethod.NGRAM):
            raise InputError(f"SGLang {cfg.algorithm} on the hybrid {arch} is not modelled: only "
                             "its own MTP layer (NEXTN/EAGLE) and NGRAM are recorded against "
                             "SGLang's Mamba-state split (a separate draft's own pools are not)",
                             hint="--speculative-algorithm NEXTN or NGRAM, or --engine vllm",
                             code=NOT_MODELLED)  # fmt: skip
    if any(x.kind in WINDOWED_KINDS for x in target.layers):
        # sliding and chunked alike: Llama 4's chunked layers are a hybrid-SWA pool in SGLang,
        # which splits a draft's layers into its full and SWA rows (not recorded: the harness
        # builds no draft worker)
        raise InputError("SGLang speculative decoding on a sliding-window or chunked-attention "
                         "model is not modelled (SGLang sizes the draft's layers in the hybrid SWA "
                         "pools)", hint="plan it with --engine vllm", code=NOT_MODELLED)  # fmt: skip
    if layers.is_dsa(target) and cfg.method is not SpecMethod.NGRAM:
        raise InputError("SGLang speculative decoding on a DSA model (DeepSeek-V3.2, GLM-5) is not "
                         "modelled: SGLang prices the draft's indexer apart from its latent",
                         hint="plan it with --engine vllm", code=NOT_MODELLED)  # fmt: skip


def _same_checkpoint(target: ModelShape, draft: ModelShape) -> bool:
    """The draft path is the target's own checkpoint (its MTP layers)."""
    return draft.architectures == target.architectures and draft.mtp is not None


def _mtp(
    target: ModelShape, cfg: SpeculativeConfig, said: str, common: SpeculativeDraft
) -> SpeculativeDraft:
    arch = (target.architectures or ("",))[0]
    if arch in HYBRID_MTP_ARCHITECTURES:
        return _hybrid_mtp(target, cfg, said, common)
    if cfg.model is None and arch not in AUTO_DRAFT_ARCHITECTURES:
        raise InputError(f"--speculative-algorithm {cfg.algorithm} on {arch or target.name}: SGLang "
                         "0.5.23 names the draft only for DeepSeek-V3/V3.2/V4, GLM-4.5/5 and a few "
                         "others (_handle_eagle_family)",
                         hint="give --speculative-draft-model-path", code=NOT_MODELLED)  # fmt: skip
    mtp = target.mtp
    if mtp is None:
        raise InputError(f"the MTP layers of {target.model_type or target.name!r} are not read by "
                         "kvcalc (it reads DeepSeek-V3's)", code=NOT_MODELLED)  # fmt: skip
    n = mtp.n_predict
    if not n or not mtp.layers:
        raise InputError(f"{target.name} has no MTP layers ({mtp.key} = {n}); SGLang would price "
                         "the draft as the whole model", hint="use a checkpoint that ships MTP "
                         "weights, or another algorithm", code=NOT_MODELLED)  # fmt: skip
    draft = replace(target, name=f"{target.name} (MTP)", layers=mtp.layers, mtp=None,
                    architectures=(mtp.architecture,))  # fmt: skip
    return replace(common, method=SpecMethod.MTP, model=draft, architecture=mtp.architecture,
                   source=f"NEXTN: {len(mtp.layers)} MTP layer(s) of the checkpoint "
                   f"({mtp.key} = {n}) ({said})")  # fmt: skip


def _hybrid_mtp(
    target: ModelShape, cfg: SpeculativeConfig, said: str, common: SpeculativeDraft
) -> SpeculativeDraft:
    """Qwen3-Next / Qwen3.5: the draft worker reads the checkpoint (the draft path, else the
    target's own) in its MTP form, one layer; the target's pool prices it only when a draft path
    is given (``_resolve_eagle_aux_hidden_state``: path-less, the target's own
    ``num_nextn_predict_layers``, which these configs lack)."""
    mtp = target.mtp
    if mtp is None or not mtp.layers:
        raise InputError(f"the MTP layer of {target.name} is not read by kvcalc",
                         code=NOT_MODELLED)  # fmt: skip
    draft = replace(target, name=f"{target.name} (MTP)", layers=mtp.layers[:1], mtp=None,
                    architectures=(mtp.architecture,))  # fmt: skip
    priced = 0 if cfg.model is None else 1
    where = ("the target's own checkpoint, not priced in the pool" if cfg.model is None
             else "priced in the pool")  # fmt: skip
    return replace(common, method=SpecMethod.MTP, model=draft, architecture=mtp.architecture,
                   pool_layers=priced,
                   source=f"{cfg.algorithm}: 1 MTP layer ({where}) ({said})")  # fmt: skip
