"""vLLM 0.33's ``--speculative-config`` / ``-sc`` and the ``--spec-*`` shorthands, read as vLLM reads
them, and the draft it builds against a target (:class:`~kvcalc.engines.speculative.SpeculativeDraft`).

From ``vllm/engine/arg_utils.py`` ``EngineArgs.create_speculative_config`` (``--spec-method``,
``--spec-model``, ``--spec-tokens`` fill ``method``, ``model``, ``num_speculative_tokens``, "mutually
exclusive" with the same key in the JSON; ``-`` in keys read as ``_``) and
``vllm/config/speculative.py`` ``SpeculativeConfig`` (a pydantic dataclass that forbids unknown
keys; ``__post_init__``: no ``method`` → ``draft_model``, or ``ngram`` when ``model`` is ``ngram``;
the MTP model types, ``deepseek_mtp``..., → ``mtp``; ``mtp`` without ``model`` uses the target's
checkpoint, but only when ``num_speculative_tokens`` is given; ``num_speculative_tokens`` defaults
to the draft's ``n_predict`` and above it must be a multiple; ``_verify_and_get_draft_tp``: 1 or the
target's TP). Methods kvcalc does not size (DFlash, DSpark, ``ngram_gpu``, ``extract_hidden_states``,
custom classes) and keys that change memory in ways not modelled are refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvcalc.engines.speculative import SpecMethod, SpeculativeConfig, SpeculativeDraft
from kvcalc.errors import InputError
from kvcalc.model.layouts import LayerKind
from kvcalc.model.shape import ModelShape

CODE = "invalid-speculative-config"
NOT_MODELLED = "speculative-not-modelled"

#: ``MTPModelTypes`` of vLLM 0.33: legacy method names that become ``mtp``
MTP_METHODS = frozenset((
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
    "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp",
    "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
    "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp",
    "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
))  # fmt: skip
#: target model types ``hf_config_override`` turns into an MTP draft (and architectures it matches)
VLLM_MTP_TARGETS = frozenset((
    "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_v4", "pangu_ultra_moe", "kimi_k3",
    "ernie4_5_moe", "nemotron_h", "nemotron_h_puzzle", "qwen3_next", "qwen4_exp", "qwen4_exp_text",
    "bailing_hybrid", "exaone_moe", "exaone4_5", "qwen3_5", "qwen3_5_moe", "qwen3_5_text",
    "qwen3_5_moe_text", "intern_s2_preview", "interns2_mobius", "longcat_flash", "step3p5",
    "step3p7", "step5", "step5_vl", "hy_v3", "hy_v4", "inkling_mm_model", "inkling_model",
    "gemma4_assistant", "gemma4_unified_assistant", "minimax_m3_vl", "glm5_next", "dots3_note",
    *MTP_METHODS,
))  # fmt: skip
VLLM_MTP_ARCHITECTURES = frozenset((
    "MiMoForCausalLM", "MiMoV2ForCausalLM", "MiMoV2OmniForCausalLM", "MiMoV2FlashForCausalLM",
    "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmOcrForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
    "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration", "Step5ForCausalLM",
    "Step5ForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3MTP",
    "NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3",
))  # fmt: skip
#: methods vLLM accepts that kvcalc does not size
UNMODELLED_METHODS = frozenset(
    ("dflash", "dspark", "ngram_gpu", "extract_hidden_states", "custom_class")
)
#: keys kvcalc reads
_READ = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size",
         "kv_cache_dtype", "quantization", "prompt_lookup_max", "prompt_lookup_min",
         "suffix_decoding_max_tree_depth")  # fmt: skip
#: keys with no effect on memory (or only on the drafter's CUDA graphs, which no estimate has)
NO_MEMORY_EFFECT = frozenset((
    "enforce_eager", "revision", "code_revision", "moe_backend", "index_share_for_mtp_iteration",
    "disable_padded_drafter_batch", "disable_eagle_block_drop", "disable_lookahead_block_hashes",
    "use_local_argmax_reduction", "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob", "draft_load_config",
    "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
    "fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k",
))  # fmt: skip
#: keys that change memory in ways kvcalc does not model, with the value that changes nothing
_UNMODELLED_KEYS: dict[str, Any] = {
    "parallel_drafting": False, "num_speculative_tokens_per_batch_size": None,
    "draft_sample_method": "greedy", "use_heterogeneous_vocab": False,
    "draft_lm_head_quantization": None, "attention_backend": None, "dspark_draft_topk": None,
    "xpress_topc": None, "enable_adaptive_verification": False,
    # the draft's length (SpeculativeConfig._maybe_override_draft_max_model_len: refused above the
    # draft's or the target's), which VllmConfig._limit_max_model_len_to_draft then serves
    "max_model_len": None,
}  # fmt: skip
#: every key of vLLM 0.33's SpeculativeConfig a person may give
KEYS = frozenset((*_READ, *NO_MEMORY_EFFECT, *_UNMODELLED_KEYS, "tensor_parallel_size"))
#: the shorthands (flag, key) of ``create_speculative_config``
SHORTHANDS = (("--spec-method", "method"), ("--spec-model", "model"),
              ("--spec-tokens", "num_speculative_tokens"))  # fmt: skip


def read_speculative_config(
    value: Any,
    *,
    spec_method: str | None = None,
    spec_model: str | None = None,
    spec_tokens: int | None = None,
) -> SpeculativeConfig | None:
    """``--speculative-config`` (JSON text or a mapping) with the shorthands, as vLLM reads them;
    None when neither is given."""
    if isinstance(value, SpeculativeConfig):
        if spec_method is spec_model is spec_tokens is None:
            return value
        value = _given(value)
    raw = _mapping(value)
    text = value if isinstance(value, str) else (json.dumps(dict(raw)) if raw is not None else "")
    for (flag, key), given in zip(SHORTHANDS, (spec_method, spec_model, spec_tokens), strict=True):
        if given is None:
            continue
        raw = dict(raw or {})
        if key in raw:  # create_speculative_config
            raise InputError(f"{flag} and --speculative-config['{key}'] are mutually exclusive",
                             hint=f"give {key} once", code=CODE)  # fmt: skip
        raw[key] = given
    if raw is None:
        return None
    data = {str(k).replace("-", "_"): v for k, v in raw.items()}
    _check_keys(data)
    method = _method(data.get("method"), data.get("model"))
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise InputError(f"speculative_config model must be a model name or path, got {model!r}",
                         code=CODE)  # fmt: skip
    return SpeculativeConfig(
        method=method, model=model,
        num_speculative_tokens=_count(data, "num_speculative_tokens", 1),
        draft_tensor_parallel_size=_count(data, "draft_tensor_parallel_size", 1),
        kv_cache_dtype=_text(data, "kv_cache_dtype"), quantization=_text(data, "quantization"),
        max_model_len=_count(data, "max_model_len", 1),
        suffix_decoding_max_tree_depth=_count(data, "suffix_decoding_max_tree_depth", 1),
        keys=tuple(data), text=text,
    )  # fmt: skip


def _given(cfg: SpeculativeConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("model", "num_speculative_tokens", "draft_tensor_parallel_size",
                "kv_cache_dtype", "quantization", "max_model_len",
                "suffix_decoding_max_tree_depth"):  # fmt: skip
        if getattr(cfg, key) is not None:
            out[key] = getattr(cfg, key)
    if cfg.method is not None:
        out["method"] = cfg.method.value
    return out


def _mapping(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value
    try:
        data = json.loads(str(value))
    except ValueError as exc:
        raise InputError(f"--speculative-config is not JSON: {exc}",
                         hint="""quote it: -sc '{"method": "mtp", "num_speculative_tokens": 1}'""",
                         code=CODE) from None  # fmt: skip
    if not isinstance(data, Mapping):
        raise InputError(f"--speculative-config must be a JSON object, got {str(value)[:40]!r}",
                         hint="""e.g. '{"method": "mtp", "num_speculative_tokens": 1}'""",
                         code=CODE)  # fmt: skip
    return data


def _check_keys(data: dict[str, Any]) -> None:
    for key, value in data.items():
        if key == "tensor_parallel_size":  # SpeculativeConfig._verify_args
            raise InputError(
                "'tensor_parallel_size' is not a valid argument in the speculative_config. Please "
                "pass 'draft_tensor_parallel_size' instead.", code=CODE)  # fmt: skip
        if key not in KEYS:  # pydantic: extra="forbid"
            raise InputError(f"speculative_config has no key {key!r} (vLLM 0.33 refuses it)",
                             hint="keys kvcalc reads: " + ", ".join(_READ), code=CODE)  # fmt: skip
        if key in _UNMODELLED_KEYS and value != _UNMODELLED_KEYS[key]:
            raise InputError(f"speculative_config {key} = {value!r} changes memory in a way kvcalc "
                             "does not model", hint=f"plan without {key}",
                             code=NOT_MODELLED)  # fmt: skip


def _method(method: Any, model: Any) -> SpecMethod | None:
    """``SpeculativeConfig.__post_init__``'s method, before the draft is read (None: decided by the
    draft, ``draft_model`` unless its name says EAGLE)."""
    if method is None:
        if model in ("ngram", "[ngram]"):
            return SpecMethod.NGRAM
        if isinstance(model, str) and _dotted(model):
            raise InputError(f"speculative_config model {model!r} is a custom proposer class, which "
                             "kvcalc does not size", code=NOT_MODELLED)  # fmt: skip
        return None
    name = str(method)
    if name in MTP_METHODS:
        return SpecMethod.MTP
    if name in UNMODELLED_METHODS:
        raise InputError(f"speculative method {name!r} is not modelled by kvcalc",
                         hint="methods kvcalc sizes: mtp, eagle3, draft_model, ngram, suffix",
                         code=NOT_MODELLED)  # fmt: skip
    try:
        return SpecMethod(name)
    except ValueError:
        raise InputError(f"vLLM 0.33 has no speculative method {name!r}",
                         hint="e.g. mtp, eagle, eagle3, draft_model, ngram, suffix",
                         code=CODE) from None  # fmt: skip


def _dotted(model: str) -> bool:
    """``_is_custom_proposer_path``: ``pkg.MyProposer``, not a path or URL."""
    if "/" in model or model.startswith(("http://", "https://", "file://")):
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def _count(data: dict[str, Any], key: str, minimum: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"speculative_config {key} must be an integer of at least {minimum}, "
                         f"got {value!r}", code=CODE)  # fmt: skip
    return value


def _text(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"speculative_config {key} must be a name, got {value!r}", code=CODE)
    return value


# -- the draft vLLM builds --------------------------------------------------------------------
def draft_method(cfg: SpeculativeConfig) -> SpecMethod:
    """The method once the draft is named: vLLM's name rules for a ``model`` without ``method``
    (``"eagle-"`` → eagle, ``"eagle3"`` → eagle3, else ``draft_model``)."""
    if cfg.method is not None and cfg.method is not SpecMethod.DRAFT_MODEL:
        return cfg.method
    name = (cfg.model or "").lower()
    if cfg.model is None:
        return cfg.method or SpecMethod.DRAFT_MODEL
    if "eagle-" in name:
        return SpecMethod.EAGLE
    if "eagle3" in name:
        return SpecMethod.EAGLE3
    if "dflash" in name or "dspark" in name:
        raise InputError(f"the draft {cfg.model!r} is a DFlash/DSpark drafter, which kvcalc does "
                         "not size", code=NOT_MODELLED)  # fmt: skip
    return SpecMethod.DRAFT_MODEL


def vllm_draft(
    target: ModelShape,
    cfg: SpeculativeConfig,
    draft: ModelShape | None,
    *,
    tensor_parallel_size: int,
    pipeline_parallel_size: int,
) -> SpeculativeDraft:
    """The draft vLLM 0.33 builds for ``cfg`` against ``target`` (``draft``: the EAGLE head's or
    draft model's config, read by the caller)."""
    method = draft_method(cfg)
    k = cfg.num_speculative_tokens
    if pipeline_parallel_size > 1:
        raise InputError("speculative decoding with pipeline parallelism is not modelled",
                         hint="plan it with --pipeline-parallel-size 1", code=NOT_MODELLED)  # fmt: skip
    # checked as SpeculativeConfig checks it, then not used: the EAGLE/MTP proposers build their
    # draft with the target's VllmConfig (llm_base_proposer.py _create_draft_vllm_config), and a
    # draft model at another TP stops the engine (DraftModelProposer._raise_if_draft_tp_mismatch)
    dtp = _draft_tp(cfg.draft_tensor_parallel_size, tensor_parallel_size)
    if method in (SpecMethod.NGRAM, SpecMethod.SUFFIX):
        if method is SpecMethod.SUFFIX and k is None:
            # _validate_suffix_decoding: k = suffix_decoding_max_tree_depth (default 24)
            k = cfg.suffix_decoding_max_tree_depth or 24
        if k is None:
            raise InputError("num_speculative_tokens must be provided with speculative model "
                             "unless the draft model config contains an n_predict parameter.",
                             code=CODE)  # fmt: skip
        return SpeculativeDraft(method=method, num_speculative_tokens=k,
                                source=f"{method} proposer: no draft model, no draft KV cache")  # fmt: skip
    if method is SpecMethod.MTP:
        return _mtp(target, cfg, tensor_parallel_size)
    if cfg.model is None:
        raise InputError("num_speculative_tokens was provided but without speculative model.",
                         hint=f'name the draft: {{"method": "{method}", "model": "..."}}',
                         code=CODE)  # fmt: skip
    if method is SpecMethod.EAGLE:
        raise InputError("EAGLE-1 heads (method eagle) are not modelled by kvcalc",
                         hint="EAGLE-3 heads (method eagle3) and draft models are", code=NOT_MODELLED)  # fmt: skip
    if draft is None:
        raise InputError(f"the draft {cfg.model!r} was not read", hint="plan through "
                         "kvcalc.planning.api, which reads the draft's config", code="internal")  # fmt: skip
    if k is None:
        raise InputError("A speculative model was provided, but `num_speculative_tokens` was not "
                         "provided", code=CODE)  # fmt: skip
    if method is SpecMethod.DRAFT_MODEL:
        _check_draft_model(target, draft, cfg)
        if dtp != tensor_parallel_size:
            raise InputError("vLLM 0.33 refuses it at start-up: Currently, "
                             "'draft_tensor_parallel_size' and 'tensor_parallel_size' must be the "
                             f"same. Got {dtp} and {tensor_parallel_size}.",
                             hint="drop draft_tensor_parallel_size (the draft model then runs at "
                                  "the target's TP)", code=CODE)  # fmt: skip
    elif draft.eagle is None:
        raise InputError(f"{cfg.model} is not an EAGLE-3 head kvcalc sizes (a Llama-type head: "
                         f"model_type llama; it has {draft.model_type!r}, {draft.architectures})",
                         code=NOT_MODELLED)  # fmt: skip
    if draft.num_layers and any(
        x.kind not in (LayerKind.FULL, LayerKind.SLIDING) for x in draft.layers
    ):
        raise InputError(f"the draft {cfg.model} has layers other than attention, which kvcalc "
                         "does not place in vLLM's groups as draft layers", code=NOT_MODELLED)  # fmt: skip
    arch = (draft.architectures or ("",))[0]
    return SpeculativeDraft(method=method, num_speculative_tokens=k, model=draft,
                            tensor_parallel_size=tensor_parallel_size,
                            kv_cache_dtype=cfg.kv_cache_dtype, architecture=arch,
                            reference=cfg.model,
                            source=f"{method} draft {cfg.model}: {draft.num_layers} layer(s)")  # fmt: skip


#: the methods whose build under data/expert parallelism vLLM 0.33's own code was recorded for
#: (``speculative_parallel.json``; suffix decoding with ``arctic_inference`` present)
_RECORDED_UNDER_DP_EP = frozenset(
    {SpecMethod.MTP, SpecMethod.EAGLE3, SpecMethod.NGRAM, SpecMethod.DRAFT_MODEL, SpecMethod.SUFFIX}
)
#: of those, the ones recorded with prefill context parallelism (an MLA target: DeepSeek-V3 TP 4
#: + PCP 2, MTP and n-gram)
_RECORDED_WITH_PCP = frozenset({SpecMethod.MTP, SpecMethod.NGRAM})
#: and the ones recorded with EPLB's redundant experts (DeepSeek-V3 and Qwen3.5 MTP, whose layer
#: takes the redundant experts as the target's; Qwen3-30B-A3B with n-gram, suffix decoding and a
#: draft model; the one EAGLE-3 head recorded is gpt-oss's, whose mxfp4 experts refuse EPLB)
_RECORDED_WITH_EPLB = frozenset(
    {SpecMethod.MTP, SpecMethod.NGRAM, SpecMethod.DRAFT_MODEL, SpecMethod.SUFFIX}
)


def check_moe_parallel_draft(value: Any, *, prefill_context_parallel_size: int, eplb: bool) -> None:
    """Speculative decoding on a MoE target whose experts are split over DP or EP: an MTP draft
    is modelled (vLLM builds it with the target's ``VllmConfig``, so its ``FusedMoE`` splits the
    experts as the target's, EPLB's redundant experts included, and its KV layers join each DP
    rank's pool as without DP), an EAGLE-3 head and a draft model (dense: split over TP like the
    target's attention, whole on each DP rank), n-gram and suffix decoding (no draft layers), all
    recorded in ``speculative_parallel.json``; with prefill context parallelism (MLA targets
    only) MTP and n-gram are recorded, with EPLB all but EAGLE-3. What no recording confirms
    (EAGLE, an EAGLE-3 head with PCP or EPLB, a draft model with PCP) is refused by name."""
    cfg = read_speculative_config(value)
    if cfg is None:
        return
    method = cfg.method if cfg.method is not None else draft_method(cfg)
    if method is SpecMethod.SUFFIX and prefill_context_parallel_size > 1:
        # suffix decoding runs on the V1 model runner, which has no PCP (recorded)
        raise InputError("vLLM refuses these settings: Model Runner V1 does not support: prefill "
                         "context parallel (suffix decoding runs on the V1 model runner)",
                         hint="drop -pcp, or use MTP or n-gram drafts with it",
                         code="invalid-parallelism")  # fmt: skip
    why = None
    if method not in _RECORDED_UNDER_DP_EP:
        why = f"a {method} draft"
    elif prefill_context_parallel_size > 1 and method not in _RECORDED_WITH_PCP:
        why = f"a {method} draft with prefill context parallelism"
    elif eplb and method not in _RECORDED_WITH_EPLB:
        why = f"a {method} draft with EPLB or redundant experts"
    if why is not None:
        raise InputError(f"speculative decoding with data or expert parallelism on a MoE model: {why} "
                         "is not modelled (no recording of vLLM's build confirms it)",
                         hint="MTP, EAGLE-3, draft-model, n-gram and suffix drafts are modelled "
                              "under DP/EP; plan this one with -tp alone",
                         code="unsupported-parallelism")  # fmt: skip


def _draft_tp(given: int | None, tp: int) -> int:
    """``_verify_and_get_draft_tp``."""
    if given is None:
        return tp
    if given not in (1, tp):
        raise InputError(f"speculative_draft_tensor_parallel_size={given} cannot be other value "
                         "than 1 or target model tensor_parallel_size", code=CODE)  # fmt: skip
    return given


def _mtp(target: ModelShape, cfg: SpeculativeConfig, tp: int) -> SpeculativeDraft:
    mtp = target.mtp
    if cfg.model is not None and cfg.model != target.name:
        raise InputError("an MTP draft from another checkpoint is not modelled",
                         hint="drop `model`: vLLM then uses the target's own MTP layers",
                         code=NOT_MODELLED)  # fmt: skip
    if cfg.num_speculative_tokens is None:  # the target is used only when k is given
        raise InputError("num_speculative_tokens must be provided with speculative model unless "
                         "the draft model config contains an n_predict parameter.",
                         hint='e.g. {"method": "mtp", "num_speculative_tokens": 1}', code=CODE)  # fmt: skip
    if mtp is None:
        known = target.model_type in VLLM_MTP_TARGETS or bool(
            VLLM_MTP_ARCHITECTURES & {*target.architectures, *target.config_architectures}
        )
        if not known:  # no override maps it to an MTP draft: ModelConfig's method check fails
            raise InputError(f"vLLM 0.33 refuses it: Unsupported speculative method: 'mtp' (no MTP "
                             f"draft architecture for model_type {target.model_type!r})",
                             hint="use a method this model has a draft for (eagle3, draft_model, ngram)",
                             code=CODE)  # fmt: skip
        raise InputError(f"MTP drafts of {target.model_type or target.name!r} are not modelled "
                         "(kvcalc knows the MTP layers of DeepSeek-V3/V3.2, GLM-4.5, GLM-4.7-Flash, GLM-5, "
                         "Qwen3-Next and Qwen3.5)", code=NOT_MODELLED)  # fmt: skip
    k, n = cfg.num_speculative_tokens, mtp.n_predict
    if n == 0 or not mtp.layers:
        raise InputError(f"{target.name} has no MTP layers ({mtp.key} = {n}): vLLM builds no MTP "
                         "draft", hint="use a checkpoint that ships MTP weights, or another method",
                         code=CODE)  # fmt: skip
    if n is not None and k > n and k % n:  # reuse of the same MTP layers
        raise InputError(f"num_speculative_tokens:{k} must be divisible by n_predict={n}",
                         code=CODE)  # fmt: skip
    draft = replace(target, name=f"{target.name} (MTP)", layers=mtp.layers, mtp=None,
                    architectures=(mtp.architecture,))  # fmt: skip
    count = len(mtp.layers)
    return SpeculativeDraft(
        method=SpecMethod.MTP, num_speculative_tokens=k, model=draft, tensor_parallel_size=tp,
        kv_cache_dtype=cfg.kv_cache_dtype, architecture=mtp.architecture,
        source=f"{count} MTP layer(s) of the checkpoint ({mtp.key} = {n}), {mtp.architecture}",
    )  # fmt: skip


def _check_draft_model(target: ModelShape, draft: ModelShape, cfg: SpeculativeConfig) -> None:
    """``verify_equal_vocab_size_if_draft_model``; a draft shorter than the target not modelled."""
    tv = getattr(target.weights, "vocab_size", None)
    dv = getattr(draft.weights, "vocab_size", None)
    if tv and dv and tv != dv:
        raise InputError(
            f"Target and draft model should have the same vocabulary size. Target model "
            f"vocab_size={tv}. Draft model vocab_size={dv}. Using models with different "
            "tokenizers can cause out-of-bounds errors during speculative decoding.", code=CODE)  # fmt: skip
