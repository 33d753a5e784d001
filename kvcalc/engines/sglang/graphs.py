"""The SGLang 0.5.23 launch flags that move ``mem_fraction_static``'s reserve: the chunked-prefill
size and the CUDA-graph settings (``arg_groups/memory_hook.py`` ``handle_gpu_memory_settings`` and
``reserve_for_graph_mb``, ``arg_groups/cuda_graph_hook.py`` ``parse_cuda_graph_config``).

``-E`` keys, and the ``launch_server`` flags of the same ``dest`` in ``--from-command``:

- ``chunked_prefill_size``: the tier's default replaced (``-1``: chunked prefill off; the activation
  term then takes ``max_prefill_tokens``, default 16,384). SGLang asserts it is a multiple of the
  page size when positive (``validation_hook.py``).
- ``max_prefill_tokens``: read by the reserve only when chunked prefill is off; printed in the
  ``max_total_num_tokens=`` line.
- ``cuda_graph_max_bs_decode`` / ``cuda_graph_max_bs_prefill``: the largest graph of each phase.
- ``disable_cuda_graph`` (both phases), ``disable_decode_cuda_graph``,
  ``disable_prefill_cuda_graph``: the phase's backend ``disabled``, its reserve term dropped.
- ``cuda_graph_bs_decode`` / ``cuda_graph_bs_prefill`` (a list of sizes: ``-E
  cuda_graph_bs_decode=1,2,4,8``, or the flags' own ``--cuda-graph-bs-decode 1 2 4 8``): the sizes
  captured. The decode graphs' largest is then the list's maximum, whatever
  ``--cuda-graph-max-bs-decode`` or ``--max-running-requests`` say; the prefill reserve counts the
  list's sizes.
- ``cuda_graph_backend_decode`` / ``cuda_graph_backend_prefill`` (``full``, ``breakable``,
  ``disabled``): above the ``disable_*`` switches (``parse_cuda_graph_config``'s precedence). An
  explicit prefill backend also skips ``apply_cuda_graph_compatibility``, so ``full`` or
  ``breakable`` keep the prefill graphs where SGLang's default turns them off (multimodal models
  outside its allow-list, pipeline parallelism, decode context parallelism, DeepSeek-V4).
- ``cuda_graph_prefill_max_context`` (and ``--cuda-graph-config``'s ``prefill.max_context_size``):
  the context size the prefill graphs' metadata is captured for. The reserve does not read it;
  SGLang refuses it unless it is positive and, rounded up to the page, at most the context length
  (``_resolve_max_context_size``).
- ``enable_torch_compile``, ``enable_torch_compile_debug_mode``, ``torch_compile_max_bs`` and
  ``cuda_graph_max_seq_len_prefill`` (and the JSON's ``prefill.max_seq_len``,
  ``full_prefill_max_req``, ``full_prefill_prefix_chunk_tokens``): taken, and leaving the reserve
  and the pool as they are: on a GPU ``torch_compile_max_bs`` picks which captured sizes are
  compiled, not which are captured, and the others are read by the graph runners only (recorded:
  the fraction and the captured sizes unchanged). ``debug_cuda_graph`` (``--debug-cuda-graph``)
  leaves them as they are too, but its decode capture asserts a breakable backend
  (``decode_cuda_graph_runner.py``: "Breakable CUDA graph is required for --debug-cuda-graph",
  read from the code, not recorded: the reference harness sizes the pool and does not capture):
  refused unless the decode graphs are breakable or off. ``--disable-cuda-graph-padding`` stays not
  modelled: SGLang then captures every decode size up to ``max_bs`` (256 graphs where its list
  has 36), which the CUDA-graph estimate shown beside the reserve does not follow; SGLang also
  refuses it beside ``--enable-torch-compile``.

Checked against SGLang 0.5.23's own resolution: tests/fixtures/sglang_0_5_23/graph_reserve.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvcalc.engines.extra import MAX_OPTION_INT, extra_bool, extra_int, is_int
from kvcalc.errors import InputError
from kvcalc.frozen import frozen

#: ``--max-prefill-tokens``' default (``server_args.py``)
MAX_PREFILL_TOKENS = 16384
GRAPH_KEYS = (
    "chunked_prefill_size",
    "max_prefill_tokens",
    "cuda_graph_max_bs_decode",
    "cuda_graph_max_bs_prefill",
    "disable_cuda_graph",
    "disable_decode_cuda_graph",
    "disable_prefill_cuda_graph",
    "cuda_graph_bs_decode",
    "cuda_graph_bs_prefill",
    "cuda_graph_backend_decode",
    "cuda_graph_backend_prefill",
    "cuda_graph_prefill_max_context",
)
#: taken, and with no effect on the reserve or the pool (the graph runners read them)
CAPTURE_KEYS = (
    "enable_torch_compile",
    "enable_torch_compile_debug_mode",
    "torch_compile_max_bs",
    "cuda_graph_max_seq_len_prefill",
    "debug_cuda_graph",
)
#: ``Backend.ALL`` (``model_executor/cuda_graph_config.py``)
BACKENDS = ("full", "breakable", "disabled")


@frozen
class ReserveSettings:
    """What a deployment sets of the reserve's inputs; None: SGLang's default for the GPU tier."""

    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = MAX_PREFILL_TOKENS
    decode_max_bs: int | None = None
    prefill_max_bs: int | None = None
    decode_graph: bool = True
    prefill_graph: bool = True
    #: the sizes given (``--cuda-graph-bs-decode`` / ``-prefill``), None: SGLang's own list
    decode_sizes: tuple[int, ...] | None = None
    prefill_sizes: tuple[int, ...] | None = None
    #: a prefill backend given explicitly (``full``/``breakable``): no compatibility cascade
    prefill_forced: bool = False
    #: ``--cuda-graph-prefill-max-context`` as given (checked against the page and the length)
    prefill_max_context: int | None = None
    #: ``--max-total-tokens`` (caps the default prefill graphs; an older option, not one of these)
    max_total_tokens: int | None = None
    #: whether any of :data:`GRAPH_KEYS` was given
    given: bool = False

    def refusal(self, profile: str) -> InputError:
        return InputError(
            f"SGLang's chunked-prefill and CUDA-graph settings are modelled for SGLang 0.5.23 "
            f"only, not the {profile!r} profile",
            hint="plan with --engine-version latest, or without them",
            code="unmodelled-option",
        )


def check_chunk(chunk: int, page_size: int) -> None:
    """``check_server_args`` (``validation_hook.py``), on the chunk as resolved (the tier's or the
    given one, divided by DP attention's ranks): ``chunked_prefill_size must be divisible by
    page_size``."""
    if chunk > 0 and chunk % page_size:
        raise InputError(
            f"SGLang refuses chunked_prefill_size {chunk:,}: it must be divisible by the page "
            f"size ({page_size})",
            hint="choose a chunk that is a multiple of the page size (-E chunked_prefill_size=N)",
            code="invalid-input",
        )


def check_prefill_context(settings: ReserveSettings, page_size: int, context_len: int) -> None:
    """``_resolve_max_context_size`` (``arg_groups/cuda_graph_hook.py``): the prefill graphs'
    context size must be positive, and rounded up to the page at most the context length."""
    size = settings.prefill_max_context
    if size is None:
        return
    if size <= 0:
        raise InputError(
            f"SGLang refuses --cuda-graph-prefill-max-context {size}: it must be a positive "
            "integer",
            hint="give a positive size, or leave it out",
            code="invalid-input",
        )
    aligned = -(-size // page_size) * page_size
    if aligned > context_len:
        raise InputError(
            f"SGLang refuses --cuda-graph-prefill-max-context {size:,}: rounded up to the page "
            f"({page_size}) it is {aligned:,}, more than the context length {context_len:,}",
            hint="give a size at most the context length (--context-length)",
            code="invalid-input",
        )


def check_capture(extra: Mapping[str, Any]) -> None:
    """The values of :data:`CAPTURE_KEYS` as SGLang's parser takes them: switches, and sizes that
    are integers."""
    extra_bool(extra, "enable_torch_compile", False)
    extra_bool(extra, "enable_torch_compile_debug_mode", False)
    if extra_bool(extra, "debug_cuda_graph", False):
        settings = reserve_settings(extra)
        if settings.decode_graph and _backend(extra, "cuda_graph_backend_decode") != "breakable":
            raise InputError(
                "SGLang 0.5.23 fails capturing its decode CUDA graphs with --debug-cuda-graph on "
                "the full decode backend (AssertionError: Breakable CUDA graph is required for "
                "--debug-cuda-graph)",
                hint="add --cuda-graph-backend-decode breakable (or --disable-decode-cuda-graph)",
                code="invalid-input",
            )
    for key in ("torch_compile_max_bs", "cuda_graph_max_seq_len_prefill"):
        extra_int(extra, key, None)


DEFAULT_SETTINGS = ReserveSettings()


def reserve_settings(extra: Mapping[str, Any]) -> ReserveSettings:
    """The settings ``extra`` gives (:data:`DEFAULT_SETTINGS` when it gives none of them)."""
    cap = extra_int(extra, "max_total_tokens", None)
    given = any(key in extra for key in GRAPH_KEYS)
    if not given:
        return DEFAULT_SETTINGS if cap is None else ReserveSettings(max_total_tokens=cap)
    chunk = extra.get("chunked_prefill_size")
    if chunk is not None and (
        not is_int(chunk) or not (chunk == -1 or 1 <= chunk <= MAX_OPTION_INT)
    ):
        raise InputError(
            f"chunked_prefill_size must be -1 (chunked prefill off) or a positive integer, "
            f"got {chunk!r}",
            code="invalid-input",
        )
    everything = extra_bool(extra, "disable_cuda_graph", False)
    decode_backend = _backend(extra, "cuda_graph_backend_decode")
    prefill_backend = _backend(extra, "cuda_graph_backend_prefill")
    decode_on = not (everything or extra_bool(extra, "disable_decode_cuda_graph", False))
    prefill_on = not (everything or extra_bool(extra, "disable_prefill_cuda_graph", False))
    return ReserveSettings(
        chunked_prefill_size=chunk,
        max_prefill_tokens=extra_int(extra, "max_prefill_tokens", MAX_PREFILL_TOKENS),
        decode_max_bs=extra_int(extra, "cuda_graph_max_bs_decode", None),
        prefill_max_bs=extra_int(extra, "cuda_graph_max_bs_prefill", None),
        decode_graph=decode_on if decode_backend is None else decode_backend != "disabled",
        prefill_graph=prefill_on if prefill_backend is None else prefill_backend != "disabled",
        decode_sizes=_sizes(extra, "cuda_graph_bs_decode"),
        prefill_sizes=_sizes(extra, "cuda_graph_bs_prefill"),
        prefill_forced=prefill_backend in ("full", "breakable"),
        prefill_max_context=_context(extra),
        max_total_tokens=cap,
        given=True,
    )


def _backend(extra: Mapping[str, Any], key: str) -> str | None:
    value = extra.get(key)
    if value is None:
        return None
    if str(value).strip().lower() not in BACKENDS:
        raise InputError(f"{key} must be one of {', '.join(BACKENDS)}, got {value!r}",
                         code="invalid-input")  # fmt: skip
    return str(value).strip().lower()


def _context(extra: Mapping[str, Any]) -> int | None:
    value = extra.get("cuda_graph_prefill_max_context")
    if value is None:
        return None
    if not is_int(value) or abs(value) > MAX_OPTION_INT:
        raise InputError(f"cuda_graph_prefill_max_context must be an integer, got {value!r}",
                         code="invalid-input")  # fmt: skip
    return int(value)


def _sizes(extra: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
    """A list of graph sizes: a list or tuple of integers, or their text (``1,2,4`` or ``1 2 4``)."""
    value = extra.get(key)
    if value is None:
        return None
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    items = [items] if is_int(items) else items
    try:
        sizes = tuple(int(x) if isinstance(x, str) else x for x in items)
    except (TypeError, ValueError):
        sizes = ()
    if not sizes or not all(is_int(x) and 1 <= x <= MAX_OPTION_INT for x in sizes):
        raise InputError(f"{key} must be a list of positive integers (1,2,4,8), got {value!r}",
                         code="invalid-input")  # fmt: skip
    return sizes


#: ``--cuda-graph-config``'s keys per phase (``ALLOWED_KEYS_PER_PHASE``), and those modelled
GRAPH_CONFIG_KEYS = {
    "decode": ("backend", "max_bs", "bs"),
    "prefill": ("backend", "max_bs", "bs", "max_context_size", "full_prefill_max_req",
                "full_prefill_prefix_chunk_tokens", "max_seq_len"),
}  # fmt: skip
#: the JSON's keys that are engine options of their own (the per-phase flags' ``dest``)
_GRAPH_CONFIG_OPTIONS = {
    "max_context_size": "cuda_graph_prefill_max_context",
    "max_seq_len": "cuda_graph_max_seq_len_prefill",
}
#: read by the prefill graph runner only (``PhaseConfig``): no effect on the reserve (recorded)
_GRAPH_CONFIG_NO_EFFECT = ("full_prefill_max_req", "full_prefill_prefix_chunk_tokens")


def graph_config_options(text: str) -> dict[str, Any]:
    """``--cuda-graph-config``'s JSON as SGLang 0.5.23's ``parse_cuda_graph_config_arg`` reads it:
    the engine options its keys give (``backend``, ``max_bs`` and ``bs`` those of the per-phase
    flags: ``cuda_graph_max_bs_decode``...; ``prefill.max_context_size`` and ``max_seq_len`` those
    of ``--cuda-graph-prefill-max-context`` and ``--cuda-graph-max-seq-len-prefill``). An error's
    message continues the flag's name (``: SGLang has no key ...``)."""
    import json

    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise InputError(f" must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise InputError(" must be a JSON object")
    options: dict[str, Any] = {}
    for phase, settings in parsed.items():
        if phase not in GRAPH_CONFIG_KEYS or not isinstance(settings, dict):
            raise InputError(f": SGLang refuses the phase {str(phase)[:20]!r} (a JSON object for "
                             "decode or prefill)")  # fmt: skip
        for key, value in settings.items():
            if key not in GRAPH_CONFIG_KEYS[phase]:
                raise InputError(f"['{phase}']: SGLang has no key {str(key)[:30]!r} (expected one "
                                 f"of {', '.join(GRAPH_CONFIG_KEYS[phase])})")  # fmt: skip
            if key in _GRAPH_CONFIG_OPTIONS:
                options[_GRAPH_CONFIG_OPTIONS[key]] = value
            elif key not in _GRAPH_CONFIG_NO_EFFECT:
                options[f"cuda_graph_{key}_{phase}"] = (
                    tuple(value) if isinstance(value, list) else value
                )
    return options
