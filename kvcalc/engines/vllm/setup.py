"""Everything vLLM resolves before sizing: cache dtype, block size, mamba mode, batch size, TP checks.

See :mod:`kvcalc.engines.vllm.defaults` for the defaults and what was confirmed from vLLM 0.33.0.
"""

from __future__ import annotations

from dataclasses import replace

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import extra_choice, extra_int
from kvcalc.engines.vllm import defaults as D
from kvcalc.engines.vllm.backends import refuse_fp8_before_sm89, user_block_size_refusal
from kvcalc.engines.vllm.batch import scheduler_batch
from kvcalc.engines.vllm.dcp import check_dcp
from kvcalc.engines.vllm.dtypes import serving_dtype
from kvcalc.engines.vllm.fp8_moe import refuse_refined_fp8_moe_before_sm89
from kvcalc.engines.vllm.groups import Sizing, align_hybrid_block_size
from kvcalc.engines.vllm.hybrid import (
    attention_layers,
    cache_layers,
    mixers,
    prefill_checkpoints,
)
from kvcalc.engines.vllm.refused import mixed_qwen2_windows
from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.layouts import WINDOWED_KINDS, FullAttention, LayerKind, RecurrentState
from kvcalc.model.shape import ModelShape


@frozen
class VllmSetup:
    """Everything resolved before sizing."""

    profile: D.VllmProfile
    dtype_name: str
    model: ModelShape  # cache dtype applied, per TP rank
    block_size: int
    sizing: Sizing
    mnbt: int
    max_num_seqs: int
    notes: tuple[str, ...]
    logs: tuple[str, ...]
    mamba_page_padded: int | None
    checkpoint_blocks: int = 0
    #: vLLM refuses to start (create_engine_config): its reason and the fix
    refusal: str | None = None
    refusal_fix: str | None = None
    #: lines vLLM logs while building its config, before loading weights (the dtype fallback)
    config_logs: tuple[str, ...] = ()


def resolve_setup(request: EngineRequest) -> VllmSetup:
    """Profile, cache dtype, per-rank model, block size, mamba mode and scheduler numbers."""
    profile, mapped = D.resolve_profile(request.engine_version)
    notes = [mapped] if mapped else []
    dtype, dtype_notes = D.resolve_cache_dtype(request, profile)
    notes += dtype_notes
    refusal, fix = _length_refusal(request, notes)
    if refusal is None and request.model.start_refusal is not None:
        # after the length (ModelConfig.__post_init__ verifies it first)
        refusal, fix = (
            request.model.start_refusal,
            (
                "max_window_layers 0 or the layer count (qwen2.py serves a window on every layer or "
                "on none)"
                if mixed_qwen2_windows(request.model)
                else "plan without --disable-sliding-window"
            ),
        )
    text_first = _builds_text_first(request.model)
    try:
        check_tp(request.model, request.tensor_parallel_size, notes)
        if not text_first:
            check_tower_tp(request)
        check_paired_pp(request)
    except InputError as bad_tp:
        if refusal is None:
            raise
        # vLLM validates the length first (ModelConfig.__post_init__, _get_and_verify_max_len) and
        # the heads against TP only after (VllmConfig.__post_init__, verify_with_parallel_config):
        # with both wrong it stops at the length
        raise InputError(
            f"vLLM refuses to start: {refusal}",
            hint=f"{fix}; then: {bad_tp.message}",
            code="max-model-len-exceeded",
        ) from None
    if refusal is None and profile.in_flight_batches:
        # the model's build, after the length and the heads: its attention and MoE kernels
        refuse_fp8_before_sm89(
            request.model, dtype, request.gpu_compute_capability, request.gpu_name
        )
    if refusal is None:
        # built after the first layer's attention: the shared experts (a later MLP), and the
        # tower of a model that builds its language model first
        check_shared_experts(request.model, request.tensor_parallel_size)
        if text_first:
            check_tower_tp(request)
    if refusal is None and profile.in_flight_batches:
        refuse_refined_fp8_moe_before_sm89(request)
    model = request.model.with_cache_dtype(dtype).per_rank(request.tensor_parallel_size)
    if request.speculative is not None:
        model = _with_speculative_state(model, request.speculative.num_speculative_tokens, notes)
    mode = _mamba_mode(request, profile, model, notes)
    checkpoint_blocks, checkpoint_alignment = _prefill_checkpoints(
        request, profile, model, mode, notes
    )
    block, padded, logs = _block_size(request, profile, model, checkpoint_alignment, notes)
    if mode == "none" and not attention_layers(model.layers) and mixers(model.layers):
        # MambaModelConfig.verify_and_update_config: without prefix caching mamba_block_size is
        # max_model_len, and an attention-free model has no other block (one per request)
        block = request.max_model_len
        notes.append(f"attention-free: one state block of max_model_len {block:,} tokens")
    mnbt, seqs, in_flight = _scheduler(request, profile, model, notes)
    config_logs: tuple[str, ...] = ()
    if profile.fp32_to_platform_dtype:  # --dtype: vLLM's fallback warning, or its refusal
        serving = serving_dtype(
            request.model, request.dtype, request.gpu_compute_capability, request.gpu_name
        )
        logs = [serving.log, *logs] if serving.log else logs
        config_logs = (serving.log,) if serving.log else ()
        if refusal is None:  # the length is validated first (ModelConfig), the dtype after
            refusal, fix = serving.refusal, serving.fix
    if request.block_size is not None and profile.v1 and refusal is None:
        refused = user_block_size_refusal(
            model, model.kv_cache_dtype, request.gpu_compute_capability, request.block_size
        )
        if refused:
            refusal, fix = refused
            if not profile.in_flight_batches:
                notes.append(
                    f"block-size rule read from vLLM 0.33.0; unconfirmed for {profile.name}"
                )
    if "num_gpu_blocks_override" in request.extra:
        notes.append("num_gpu_blocks_override replaces the block count (and the memory checked)")
    dcp = check_dcp(request, profile, model, block, notes)
    cross = LayerKind.CROSS in model.kinds
    if cross:
        if refusal is None:  # ModelConfig checks the length first
            _check_encoder_decoder(request, mnbt)
        notes.append(
            f"cross-attention layers: each request books cdiv({mnbt:,}, {block}) blocks, vLLM's "
            "encoder budget (max_num_encoder_input_tokens = max_num_batched_tokens), and holds its "
            "encoder's tokens at run time"
        )
    sizing = Sizing(
        max_model_len=request.max_model_len,
        in_flight_tokens=in_flight,
        mamba_cache_mode=mode,
        dcp=dcp,
        encoder_budget_tokens=mnbt if cross else 0,
    )
    return VllmSetup(
        profile=profile, dtype_name=dtype.name, model=model, block_size=block, sizing=sizing,
        mnbt=mnbt, max_num_seqs=seqs, notes=tuple(notes), logs=tuple(logs), mamba_page_padded=padded,
        checkpoint_blocks=checkpoint_blocks, refusal=refusal, refusal_fix=fix,
        config_logs=config_logs,
    )  # fmt: skip


def _check_encoder_decoder(request: EngineRequest, mnbt: int) -> None:
    """What vLLM 0.33 refuses for an encoder-decoder model (Whisper): chunked prefill is off
    (``SchedulerConfig.__post_init__``), so a given token budget below ``max_model_len`` fails
    ``verify_max_model_len`` (a defaulted one is raised to the length); kvcalc does not model
    whisper.py under pipeline parallelism."""
    if request.max_num_batched_tokens is not None and mnbt < request.max_model_len:
        raise InputError(
            f"vLLM refuses to start: max_num_batched_tokens ({mnbt}) is smaller than "
            f"max_model_len ({request.max_model_len}), and an encoder-decoder model runs without "
            "chunked prefill",
            hint="raise --max-num-batched-tokens or lower --max-model-len",
            code="invalid-input",
        )
    if request.pipeline_parallel_size > 1:
        raise InputError(
            "pipeline parallelism of an encoder-decoder model (cross-attention) is not modelled",
            hint="plan it with --pipeline-parallel-size 1",
            code="unsupported-model",
        )


def _length_refusal(request: EngineRequest, notes: list[str]) -> tuple[str | None, str | None]:
    """vLLM's refusal of a ``max_model_len`` above the model's derived length, and its fix."""
    refusal = fix = None
    derived = request.model.max_model_len
    if request.model.max_model_len_key is None:
        # _get_and_verify_max_len: no length key in the config, so a length the user gives is
        # taken as it is (the 2,048 fallback is only the default)
        if request.max_model_len > derived:
            notes.append(
                f"no length key in config.json: vLLM takes max_model_len {request.max_model_len:,} "
                f"as given (its {derived:,} is only the default)"
            )
    elif request.max_model_len > derived:
        if request.extra.get("allow_long_max_model_len"):
            notes.append(
                f"max_model_len {request.max_model_len:,} exceeds the model's derived {derived:,}: "
                "started because of VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (positions past it are untrained)"
            )
        else:
            # vLLM 0.33 ModelConfig validation (config/model.py, _get_and_verify_max_len)
            # vLLM's derived length is a float (scaled by the RoPE factor, 1.0 without one)
            m = request.model
            refusal = (
                f"User-specified max_model_len ({request.max_model_len}) is greater than the derived "
                f"max_model_len ({m.max_model_len_key}={float(derived)} or model_max_length="
                f"{m.config_model_max_length} in model's config.json). To allow overriding this "
                "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
            )
            fix = (
                f"--max-model-len {derived}, or VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ... "
                f"(kvcalc: --allow-long-max-model-len)"
            )
    return refusal, fix


def _block_size(
    request: EngineRequest,
    profile: D.VllmProfile,
    model: ModelShape,
    checkpoint_alignment: int,
    notes: list[str],
) -> tuple[int, int | None, list[str]]:
    """(block size, padded mamba page, log lines): user or backend choice, then hybrid alignment.
    Kept on the per-rank model for the same choice's inputs: a file of deployments asks it once."""
    key = ("vllm.block_size", profile.name, request.gpu_compute_capability, request.block_size,
           checkpoint_alignment)  # fmt: skip
    block, padded, logs, said = model.memo(
        key, lambda: _chosen_block_size(request, profile, model, checkpoint_alignment)
    )
    notes.extend(said)
    return block, padded, list(logs)


def _chosen_block_size(
    request: EngineRequest, profile: D.VllmProfile, model: ModelShape, checkpoint_alignment: int
) -> tuple[int, int | None, tuple[str, ...], tuple[str, ...]]:
    """:func:`_block_size`'s (block, padded page, logs, notes), computed."""
    notes: list[str] = []
    logs: list[str] = []
    dtype = model.kv_cache_dtype
    cc = request.gpu_compute_capability
    block, backend, note = D.default_block_size(model, dtype, cc, profile)
    if request.block_size is not None:
        block, backend, note = request.block_size, None, f"block size {request.block_size} (user)"
    if note:
        notes.append(note)
    if backend and block != D.DEFAULT_BLOCK_SIZE and profile.reserves_null_block:
        logs.append(f"Setting kv cache block size to {block} for {backend} backend(s).")
    aligned = None
    if profile.v1:
        aligned = align_hybrid_block_size(
            tuple(layout for _, _, layout in cache_layers(model.layers)),
            block,
            mla_align_128=profile.mla_hybrid_align_128,
            checkpoint_alignment=checkpoint_alignment,
        )
    if aligned is None:
        return block, None, tuple(logs), tuple(notes)
    return aligned.block_size, aligned.mamba_page_padded, (*logs, *aligned.logs), tuple(notes)


def _scheduler(
    request: EngineRequest, profile: D.VllmProfile, model: ModelShape, notes: list[str]
) -> tuple[int, int, int]:
    """(max_num_batched_tokens, max_num_seqs, tokens in flight for the sliding/chunked reserve)."""
    mnbt, seqs, batch_note = scheduler_batch(request, profile)
    in_flight = mnbt * _concurrent_batches(request, profile)
    if any(kind in WINDOWED_KINDS for kind in model.kinds):
        if request.max_num_batched_tokens is None:
            notes.append(batch_note)
        notes.append(_in_flight_note(request, profile, mnbt, in_flight))
    return mnbt, seqs, in_flight


def check_tp(model: ModelShape, tp: int, notes: list[str]) -> None:
    """vLLM's model files: ``kv % tp == 0`` when kv >= tp, else ``tp % kv == 0`` (replicated)."""
    if tp == 1:
        return
    # kept on the model: a file of deployments checks the same model at the same TP many times
    notes.extend(model.memo(("vllm.check_tp", tp), lambda: _tp_notes(model, tp)))


#: towers whose gated MLP is a ``MergedColumnParallelLinear`` ``intermediate_size`` wide, which
#: asserts every output size divides TP (``linear.py``): Qwen2.5-VL's ``Qwen2_5_VisionMLP``, which
#: EXAONE 4.5's tower builds before its own blocks (its 3,420 fails at TP 8, recorded)
_MERGED_MLP_TOWERS = ("qwen2_5_vl", "exaone4_5", "hcx_vision_v2")
#: those and InternViT, whose fc1 is a ``ColumnParallelLinear`` (``divide`` asserts the same)
_MLP_SPLIT_TOWERS = (*_MERGED_MLP_TOWERS, "intern_vit")


#: model types whose vLLM model file builds each of kvcalc's layers as this many modules, which
#: ``get_pp_indices`` splits over the pipeline stages: Cosmos 3 Edge's attention/MLP pairs
#: (``cosmos3_edge.py``, ``layers_block_type`` ``["full_attention", "mlp"] × num_hidden_layers``)
_MODULES_PER_LAYER = {"cosmos3_edge_text": 2}


def check_paired_pp(request: EngineRequest) -> None:
    """vLLM splits the modules, kvcalc its layers: the same stages only where the pipeline size
    divides the layer count (Cosmos 3 Edge's 28 pairs at PP 3: vLLM's first stage holds 10
    attention modules and the embedding, kvcalc's 9 pairs); elsewhere refused, not recorded."""
    per, pp = _MODULES_PER_LAYER.get(request.model.model_type, 1), request.pipeline_parallel_size
    n = request.model.num_layers
    if per > 1 and n % pp:
        raise InputError(
            f"pipeline_parallel_size {pp}: vLLM 0.33 splits {request.model.model_type}'s {per * n} "
            f"modules ({n} attention/MLP pairs) over the stages, which kvcalc sizes only where "
            f"the pipeline size divides {n} (not recorded otherwise)",
            hint=f"a pipeline size dividing {n}",
            code="unsupported-parallelism",
        )


def check_tower_tp(request: EngineRequest) -> None:
    """The vision tower's heads over TP, as its attention splits them (``dist_utils.divide``
    asserts: GLM-4.1V's 12 heads at TP 8 fail ``initialize_model`` with "12 is not divisible by
    8"), and the MLP width of :data:`_MLP_SPLIT_TOWERS` (InternViT's heads not dividing TP are
    not refused: vLLM builds that attention whole on every rank, and kvcalc counts it so); not where the tower is not built (its
    modalities limited to 0) or is built whole on every rank (``--mm-encoder-tp-mode data`` on a
    class that supports it)."""
    vision, tp = getattr(request.model.weights, "vision", None), request.tensor_parallel_size
    heads = vision.num_heads if vision is not None else 0
    width = vision.intermediate_size if vision and vision.family in _MLP_SPLIT_TOWERS else 0
    if vision is not None and vision.family == "granite_speech":  # its CTC out: a column split
        width = vision.projector_output_dim  # of output_dim (42 at TP 8: "not divisible", recorded)
    if tp == 1 or (not heads or heads % tp == 0) and (not width or width % tp == 0):
        return
    from kvcalc.engines.vllm.mm import (  # multimodal models only
        encoder_tp_data,
        parse_limits,
        tower_modalities,
    )

    limits = request.limit_mm_per_prompt
    archs = (*request.model.config_architectures, *request.model.architectures)
    if limits is not None and parse_limits(limits).tower_off(archs):
        return
    data = encoder_tp_data(archs)
    if request.mm_encoder_tp_mode == "data" and data:
        return
    hint = "--mm-encoder-tp-mode data builds the tower whole on every rank; " if data else ""
    # the modalities the class marks its tower with (an audio tower: {"audio": 0})
    modalities = tower_modalities(archs)
    zeros = ", ".join(f'"{m}": 0' for m in modalities) or '"image": 0, "video": 0'
    tower = "audio tower" if modalities == ("audio",) else "vision tower"
    off = f"'{{{zeros}}}' to serve it text-only"
    # intern_vit.py builds the attention whole on every rank where TP does not divide its heads
    # (counted: kvcalc.estimate.vision_tensors._intern_vit); its MLP still splits, below
    vit = vision is not None and vision.family == "intern_vit"
    if heads and heads % tp and not vit:
        raise InputError(
            f"the {tower}'s {heads} attention heads are not divisible by tensor_parallel_size "
            f"{tp} (vLLM fails building it: {heads} is not divisible by {tp})",
            hint=f"{hint}or a TP size dividing {heads}, or --limit-mm-per-prompt {off}",
            code="invalid-parallelism",
        )
    if not width or width % tp == 0:  # InternViT's heads alone: its attention whole, counted
        return
    granite = vision is not None and vision.family == "granite_speech"
    linear = "ColumnParallelLinear" if vit or granite else "MergedColumnParallelLinear"
    raise InputError(
        f"the {tower}'s MLP width {width} is not divisible by tensor_parallel_size {tp} "
        f"(vLLM fails building it: {linear} asserts each output size divides TP)",
        hint=f"{hint}or a TP size dividing {width}, or --limit-mm-per-prompt {off}",
        code="invalid-parallelism",
    )


def _tp_notes(model: ModelShape, tp: int) -> tuple[str, ...]:
    """:func:`check_tp`'s checks (raising as vLLM refuses) and the notes they leave."""
    notes: list[str] = []
    if model.num_attention_heads % tp:
        raise InputError(
            f"{model.num_attention_heads} attention heads are not divisible by tensor_parallel_size {tp}",
            code="invalid-parallelism",
        )
    if model.max_tensor_parallel is not None and tp > model.max_tensor_parallel[0]:
        most, why, code = model.max_tensor_parallel
        message, hint = f"tensor_parallel_size {tp}: {why}", f"a TP size up to {most}"
        if code == "unsupported-parallelism":  # not checked above it: kvcalc's own refusal
            raise InputError(message, hint=hint, code="unsupported-parallelism")
        raise InputError(message, hint=hint, code="invalid-parallelism")  # vLLM refuses it
    for q in model.layer_query_heads:  # the model file's ``total_num_heads % tp_size`` assert
        if q % tp:
            raise InputError(
                f"layers of {q} attention heads are not divisible by tensor_parallel_size {tp}",
                code="invalid-parallelism",
            )
    _check_tp_state(model, tp)
    heads = {
        x.kv_heads
        for x in attention_layers(model.layers)
        if isinstance(x, FullAttention) and x.kv_heads
    }
    for kv in sorted(heads):
        if (kv >= tp and kv % tp) or (kv < tp and tp % kv):
            raise InputError(
                f"{kv} KV heads cannot be split over tensor_parallel_size {tp}",
                hint="vLLM needs kv_heads % tp == 0, or tp % kv_heads == 0 to replicate",
                code="invalid-parallelism",
            )
        if kv < tp:
            notes.append(
                f"{kv} KV heads on {tp} ranks: one head per rank, each replicated {tp // kv}×"
            )
    if model.is_mla:
        notes.append("MLA latent is not split by TP: every rank stores the whole latent")
    return tuple(notes)


#: text model types built by vLLM 0.33's ``deepseek_v2.py``, whose shared experts are a
#: ``DeepseekV2MLP``: a ``MergedColumnParallelLinear`` asserting TP divides their width
_DEEPSEEK_V2_TYPES = ("deepseek_v2", "deepseek_v3")


#: multimodal architectures whose vLLM 0.33 model builds its language model before its tower
#: (``bagel.py``: ``language_model``, then ``vit_model``; recorded: BAGEL's fp8 cache on an A100
#: at TP 8 fails in the text attention before the tower's 12 heads at TP 8)
_TEXT_FIRST_ARCHITECTURES = frozenset({"BagelForConditionalGeneration"})


def _builds_text_first(model: ModelShape) -> bool:
    return bool(_TEXT_FIRST_ARCHITECTURES & set(model.config_architectures))


def check_shared_experts(model: ModelShape, tp: int) -> None:
    """DeepSeek-V2's shared experts over TP: ``moe_intermediate_size × n_shared_experts`` must
    divide (``linear.py`` asserts it: Kimi-VL's class defaults, 2 × 1,407 at TP 8, recorded)."""
    weights = getattr(model, "weights", None)
    moe = getattr(weights, "moe", None)
    if moe is None or getattr(weights, "model_type", "") not in _DEEPSEEK_V2_TYPES:
        return
    width = moe.shared_intermediate_size
    if width and width % tp:
        raise InputError(
            f"the shared experts' width {width} is not divisible by tensor_parallel_size {tp} "
            "(vLLM fails building them: MergedColumnParallelLinear asserts each output size "
            "divides TP)",
            hint=f"a TP size dividing {width}",
            code="invalid-parallelism",
        )


def _check_tp_state(model: ModelShape, tp: int) -> None:
    """vLLM's ``divide`` asserts that every TP-split state dimension divides evenly."""
    for layout in {x for x in mixers(model.layers)}:
        for name, size in layout.tp_split_dims(tp).items():
            if size % tp:
                raise InputError(
                    f"{type(layout).__name__} {name} {size} is not divisible by "
                    f"tensor_parallel_size {tp}",
                    hint="vLLM splits recurrent state over TP ranks evenly (its divide() asserts)",
                    code="invalid-parallelism",
                )


def _with_speculative_state(model: ModelShape, k: int, notes: list[str]) -> ModelShape:
    """Recurrent layers whose conv state keeps ``conv_kernel - 1 + k`` rows under speculative
    decoding (``MambaStateShapeCalculator``'s ``num_spec``; before the hybrid block alignment)."""
    if not k or not any(isinstance(x, RecurrentState) for x in model.layers):
        return model
    layers = tuple(
        x.with_speculative_tokens(k) if isinstance(x, RecurrentState) else x for x in model.layers
    )
    if layers != model.layers:
        notes.append(f"recurrent conv states keep {k} more row(s) for the speculative tokens")
    return replace(model, layers=layers)


def _mamba_mode(
    request: EngineRequest, profile: D.VllmProfile, model: ModelShape, notes: list[str]
) -> str:
    """vLLM 0.33 ``MambaModelConfig.verify_and_update_config`` (model_executor/models/config.py):
    prefix caching on sets mode ``none`` to ``align``; off sets any mode to ``none``. 0.33's
    ``EngineArgs.create_engine_config`` no longer passes ``--mamba-cache-mode`` on ("It has no
    effect: Mamba prefix caching follows --enable-prefix-caching"); before 0.33 the option is
    read, then reset by the same rule (read from 0.33.0; unconfirmed for earlier releases)."""
    if not model.memo(("vllm.recurrent",), lambda: any(isinstance(x, RecurrentState)
                                                        for x in model.layers)):  # fmt: skip
        return "none"
    # EngineArgs: prefix caching defaults to ModelConfig.is_prefix_caching_supported, which is
    # False for an attention-free model (Mamba, Mamba2: "still experimental")
    free = not attention_layers(model.layers)
    prefix = not free if request.enable_prefix_caching is None else request.enable_prefix_caching
    default = "align" if prefix else "none"
    given = extra_choice(request.extra, "mamba_cache_mode", None, ("none", "align"))
    mode = default
    how = f"prefix caching {'on' if prefix else 'off'}"
    if request.enable_prefix_caching is None:
        how += ", the default" + (" for an attention-free model" if free else "")
    if given is not None and given != default:
        if profile.in_flight_batches:
            how += f"; -E mamba_cache_mode={given} has no effect in vLLM 0.33 (deprecated)"
        elif prefix:
            how += f"; vLLM resets mamba_cache_mode={given} to 'align' when prefix caching is on"
        else:
            how += f"; vLLM resets mamba_cache_mode={given} to 'none' when prefix caching is off"
    notes.append(
        f"mamba cache mode {mode!r} ({how}); align keeps 2 state blocks per request "
        "(+ prefill checkpoints), none 1"
    )
    return mode


def _prefill_checkpoints(
    request: EngineRequest, profile: D.VllmProfile, model: ModelShape, mode: str, notes: list[str]
) -> tuple[int, int]:
    """vLLM 0.33 align mode: (checkpoint blocks per mamba layer, block alignment they need); the
    rules per mixer are in :mod:`kvcalc.engines.vllm.hybrid`."""
    if mode != "align" or not profile.prefill_checkpoints:
        return 0, 1
    blocks, alignment, note = prefill_checkpoints(
        model.layers, model.dtype, request.gpu_compute_capability
    )
    if note:
        notes.append(note)
    return blocks, alignment


def _concurrent_batches(request: EngineRequest, profile: D.VllmProfile) -> int:
    """``VllmConfig.max_concurrent_batches`` (``config/vllm.py``): with async scheduling (on by
    default) 2, or PP + 1 on the V2 model runner; without it one batch per pipeline stage."""
    override = extra_int(request.extra, "max_concurrent_batches", None)
    if override:
        return override
    if not profile.in_flight_batches:
        return 1
    pp = request.pipeline_parallel_size
    if request.async_scheduling is False:  # --no-async-scheduling
        return pp
    if _v1_runner_without_async(request):
        return pp
    return 2 if pp == 1 else pp + 1


def _v1_runner_without_async(request: EngineRequest) -> bool:
    """Suffix decoding runs on the V1 model runner (``_get_v2_model_runner_unsupported_features``:
    "speculative method 'suffix'"), which cannot schedule it asynchronously
    (``VllmConfig._set_async_scheduling``: "suffix-based speculative decoding"): vLLM 0.33 turns
    async scheduling off, one batch a pipeline stage in flight (gpt-oss-20b at DP 2 + EP with
    suffix decoding: 521 blocks a sliding request, 696,597 tokens, where n-gram on the V2 runner
    keeps two batches, 1,033 and 580,836; recorded), and refuses ``--async-scheduling`` with it."""
    draft = request.speculative
    if draft is None:
        return False
    from kvcalc.engines.speculative import SpecMethod

    if draft.method is not SpecMethod.SUFFIX:
        return False
    if request.async_scheduling:
        raise InputError(
            "vLLM refuses these settings: Async scheduling is not supported by the V1 model "
            "runner with suffix-based speculative decoding.",
            hint="drop --async-scheduling (vLLM then turns it off for suffix decoding)",
            code="invalid-speculative-config",
        )
    return True


def _in_flight_note(
    request: EngineRequest, profile: D.VllmProfile, mnbt: int, in_flight: int
) -> str:
    if not profile.in_flight_batches:
        return f"sliding/chunked reserve uses one batch in flight: {mnbt:,} tokens"
    note = f"sliding/chunked reserve uses max_in_flight_tokens = {in_flight:,} ({in_flight // mnbt} × {mnbt:,})"
    if (
        request.pipeline_parallel_size > 1
        and "max_concurrent_batches" not in request.extra
        and request.async_scheduling is not False
    ):
        note += "; pp + 1 batches assumes the V2 model runner with async scheduling (unconfirmed)"
    return note
