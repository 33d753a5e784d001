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

Checked against SGLang 0.5.23's own resolution: tests/fixtures/sglang_0_5_23/graph_reserve.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvcalc.engines.extra import MAX_OPTION_INT, extra_bool, extra_int, is_int
from kvcalc.errors import InputError

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
)


@dataclass(frozen=True, kw_only=True)
class ReserveSettings:
    """What a deployment sets of the reserve's inputs; None: SGLang's default for the GPU tier."""

    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = MAX_PREFILL_TOKENS
    decode_max_bs: int | None = None
    prefill_max_bs: int | None = None
    decode_graph: bool = True
    prefill_graph: bool = True
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
    return ReserveSettings(
        chunked_prefill_size=chunk,
        max_prefill_tokens=extra_int(extra, "max_prefill_tokens", MAX_PREFILL_TOKENS),
        decode_max_bs=extra_int(extra, "cuda_graph_max_bs_decode", None),
        prefill_max_bs=extra_int(extra, "cuda_graph_max_bs_prefill", None),
        decode_graph=not (everything or extra_bool(extra, "disable_decode_cuda_graph", False)),
        prefill_graph=not (everything or extra_bool(extra, "disable_prefill_cuda_graph", False)),
        max_total_tokens=cap,
        given=True,
    )
