"""Which CUDA graphs a vLLM worker captures: capture sizes, the graph mode, the descriptors.

Read in the vLLM 0.33.0 wheel and checked against its own code for every scenario of
``tests/fixtures/vllm_0_33/cudagraph_captures.json``:

- ``config/vllm.py`` ``_set_cudagraph_sizes``: the default ceiling is
  ``min(max_num_seqs · q · 2, 1024 on SM 10.x else 512)`` (``q`` = ``uniform_decode_query_len`` =
  1 + speculative tokens), unless ``max_cudagraph_capture_size`` is given; then
  ``min(max_num_batched_tokens, ceiling)``. Sizes: 1, 2, 4, multiples of 8 below 256, multiples
  of 16 from 256, up to the ceiling; plus ``max_num_batched_tokens`` when it fits and the uniform
  decode sizes (``max_num_seqs`` at q = 1; ``n · q`` for the request-count grid at q > 1). Given
  sizes are deduplicated and kept up to ``max_num_batched_tokens``; a given maximum that differs
  from the largest kept size is refused when both are given, else truncated to it.
- ``config/compilation.py`` ``resolve_cudagraph_mode_and_sizes`` (after the attention backends are
  known): FULL needs a backend that graphs mixed batches (ALWAYS), else FULL_AND_PIECEWISE; no full
  graphs at all (NEVER: Llama 4's chunked local attention) → PIECEWISE; speculative decoding needs
  UNIFORM_BATCH for full decode graphs; model runner V1 rounds every size up to a multiple of q.
- ``v1/cudagraph_dispatcher.py`` ``initialize_cudagraph_keys`` (runner V1) and
  ``v1/worker/gpu/cudagraph_utils.py`` ``CudaGraphManager._init_candidates`` (runner V2, the
  default from 0.29 on): one mixed-batch descriptor per size; FULL decode descriptors for the sizes
  from q to ``q · max_num_seqs`` (V2: each size rounded up to a multiple of q, deduplicated).

Older releases, read in their wheels: 0.8-0.9 captured 1, 2, 4 and multiples of 8 to 512,
0.10-0.11 to ``min(2 · max_num_seqs, 512)`` (the 16-stride from 256 and the two size settings
arrive in 0.12; 0.10.0 is not read); the ceiling was 512 on every GPU before 0.28;
``max_num_batched_tokens`` is appended from 0.21 on; the ceiling counts the decode query
length from 0.16 (read in 0.16; 0.13-0.15 not read); PIECEWISE was the default mode before 0.11; decode sizes at q > 1 from 0.29 and
``max_num_seqs`` at q = 1 from 0.31. The dispatcher's keys are the same code from 0.18 to 0.33.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum, IntEnum

from kvcalc.errors import InputError
from kvcalc.estimate.captures import CudaGraphCaptures


class GraphMode(str, Enum):
    """vLLM's ``CUDAGraphMode`` (``-cc.cudagraph_mode``)."""

    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"

    @property
    def mixed(self) -> GraphMode:
        """The graphs of mixed prefill-decode batches: NONE, PIECEWISE or FULL."""
        if self is GraphMode.FULL_DECODE_ONLY:
            return GraphMode.NONE
        return GraphMode.PIECEWISE if self is GraphMode.FULL_AND_PIECEWISE else self

    @property
    def full_decode(self) -> bool:
        """Uniform decode batches run as FULL graphs."""
        return self in (GraphMode.FULL, GraphMode.FULL_DECODE_ONLY, GraphMode.FULL_AND_PIECEWISE)

    @property
    def separate_decode(self) -> bool:
        """Decode batches get their own FULL graphs beside the mixed ones."""
        return self in (GraphMode.FULL_DECODE_ONLY, GraphMode.FULL_AND_PIECEWISE)


MODES = tuple(m.value for m in GraphMode)
#: the error code of a CUDA-graph setting vLLM would refuse
CODE = "invalid-cudagraph-setting"


def parse_graph_mode(text: str, *, what: str = "cudagraph_mode") -> GraphMode:
    """``full_and_piecewise`` → :attr:`GraphMode.FULL_AND_PIECEWISE` (vLLM reads it upper-cased)."""
    try:
        return GraphMode(str(text).strip().upper())
    except ValueError:
        raise InputError(
            f"{what}: vLLM has no CUDA graph mode {str(text)[:40]!r}",
            hint="choose one of: " + ", ".join(MODES),
            code=CODE,
        ) from None


class GraphSupport(IntEnum):
    """vLLM's ``AttentionCGSupport``: which batches the attention backends can graph (the least of
    all layers' backends counts)."""

    NEVER = 0
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    UNIFORM_BATCH = 2
    ALWAYS = 3


#: ``model_executor/models/config.py`` ``GptOssForCausalLMConfig``: 1024 unless sizes or a maximum
#: are given ("This will increase the number of CUDA graphs from 67 to 83"); 0.11.0: the sizes
#: 1, 2, 4, 8-248 by 8, 256-992 by 16 ("from 67 to 81")
MODEL_MAX_CAPTURE_SIZE = {"GptOssForCausalLM": (1024, 992)}


def model_max_size(architectures: Sequence[str], version: tuple[int, ...] = (0, 33)) -> int | None:
    """The maximum capture size a model's config hook sets when the user sets neither."""
    for a in architectures:
        if a in MODEL_MAX_CAPTURE_SIZE:
            new, old = MODEL_MAX_CAPTURE_SIZE[a]
            return new if version >= (0, 12) else old
    return None


def _refuse(message: str, hint: str) -> InputError:
    return InputError(message, hint=hint, code=CODE)


def capture_sizes(
    version: tuple[int, ...],
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    decode_query_len: int = 1,
    blackwell: bool = False,
    sizes: Sequence[int] | None = None,
    max_size: int | None = None,
    model_max: int | None = None,
) -> tuple[int, ...]:
    """The capture sizes ``_set_cudagraph_sizes`` writes back (ascending), graphs not disabled;
    ``model_max``: the model's hook (:func:`model_max_size`), used when neither is given."""
    q, seqs, tokens = decode_query_len, max_num_seqs, max_num_batched_tokens
    if version < (0, 12):
        if sizes is not None or max_size is not None:
            raise _refuse(
                "--cudagraph-capture-sizes and --max-cudagraph-capture-size exist from vLLM 0.12 on",
                "older releases spell the sizes --cuda-graph-sizes, which kvcalc does not model; "
                "plan with --engine-version 0.12 or later, or leave the sizes at vLLM's default",
            )
        return _early_sizes(version, seqs, tokens, model_max)
    given_max = max_size
    if sizes is None and max_size is None:
        max_size = model_max
    decode: list[int] = []
    ceiling = max_size
    if ceiling is None:
        platform = 1024 if blackwell and version >= (0, 28) else 512
        ceiling = min(seqs * (q if version >= (0, 16) else 1) * 2, platform)
        if q > 1 and version >= (0, 29):
            grid = _request_counts(min(seqs, platform))
            decode = sorted({n * q for n in grid if n * q <= ceiling})
        elif q == 1 and version >= (0, 31) and seqs <= ceiling:
            decode = [seqs]
    ceiling = min(tokens, ceiling)
    if ceiling < 1:
        raise _refuse(f"max_cudagraph_capture_size must be at least 1, got {ceiling}",
                      "give a positive --max-cudagraph-capture-size")  # fmt: skip
    if sizes is not None:
        chosen = sorted({s for s in sizes if s <= tokens})
    else:
        chosen = [s for s in (1, 2, 4) if s <= ceiling]
        if ceiling >= 8:
            chosen += range(8, min(ceiling + 1, 256), 8)
        if ceiling >= 256:
            chosen += range(256, ceiling + 1, 16)
        if version >= (0, 21) and tokens <= ceiling:
            chosen.append(tokens)
        chosen = sorted({*chosen, *(s for s in decode if s <= tokens)})
    largest = chosen[-1] if chosen else 0
    if sizes is not None and given_max is not None and given_max != largest:
        raise _refuse(
            f"vLLM refuses max_cudagraph_capture_size {max_size}: it should be consistent with the "
            f"max value of cudagraph_capture_sizes ({largest}, the largest up to "
            f"max_num_batched_tokens {tokens:,})",
            "give --max-cudagraph-capture-size equal to the largest capture size, or only one of the two",
        )
    return tuple(chosen)


def _early_sizes(
    version: tuple[int, ...], seqs: int, tokens: int, model_max: int | None
) -> tuple[int, ...]:
    """0.8-0.11 (``VllmConfig._set_cudagraph_sizes``, read in 0.8.5, 0.9.2, 0.10.1.1, 0.11.0):
    1, 2, 4 and multiples of 8 up to 512 (0.10 on: up to ``min(2 · max_num_seqs, 512)``, the
    default ``--cuda-graph-sizes``; a model hook's list: by 8 below 256, by 16 to its maximum),
    those above ``max_num_batched_tokens`` dropped."""
    if model_max is not None:
        grid = (1, 2, 4, *range(8, 256, 8), *range(256, model_max + 1, 16))
    else:
        top = min(2 * seqs, 512) if version >= (0, 10) else 512
        grid = (1, 2, 4, *range(8, top + 1, 8))
    return tuple(s for s in grid if s <= tokens)


def _request_counts(max_reqs: int) -> list[int]:
    counts = [n for n in (1, 2, 4) if n <= max_reqs]
    counts += range(8, min(max_reqs + 1, 256), 8)
    counts += range(256, max_reqs + 1, 16)
    return sorted({*counts, max_reqs})


def resolve_mode(
    mode: GraphMode, support: GraphSupport, decode_query_len: int
) -> tuple[GraphMode, str | None]:
    """``resolve_cudagraph_mode_and_sizes``: the mode the attention backends allow (attention in
    the splitting ops and piecewise compilation, vLLM's defaults), and why it changed."""
    if mode is GraphMode.NONE:
        return mode, None
    why = None
    if mode.mixed is GraphMode.FULL and support is not GraphSupport.ALWAYS:
        if support is GraphSupport.NEVER:
            raise _refuse(
                f"vLLM refuses cudagraph_mode {mode.value}: the attention backend captures no full "
                "graphs", "use cudagraph_mode PIECEWISE",
            )  # fmt: skip
        mode, why = GraphMode.FULL_AND_PIECEWISE, "FULL needs a backend that graphs mixed batches"
    if mode.full_decode and support is GraphSupport.NEVER:
        mode, why = GraphMode.PIECEWISE, "the attention backend captures no full graphs"
    if mode.full_decode and decode_query_len > 1 and support < GraphSupport.UNIFORM_BATCH:
        mode, why = GraphMode.PIECEWISE, "the backend graphs single-token decodes only"
    return mode, why


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def spec_decode_sizes(sizes: Sequence[int], decode_query_len: int) -> tuple[int, ...]:
    """Runner V1's ``adjust_cudagraph_sizes_for_spec_decode``: every size rounded up to a multiple
    of q, those past the largest dropped."""
    q = decode_query_len
    if not sizes or q <= 1:
        return tuple(sizes)
    top = max(sizes)
    rounded = sorted({_round_up(s, q) for s in sizes if _round_up(s, q) <= top})
    if not rounded and q <= top:
        rounded = [q]
    if not rounded:
        raise _refuse(
            f"vLLM finds no CUDA graph size that is a multiple of {q} (num_speculative_tokens + 1)",
            "raise max_cudagraph_capture_size or lower num_speculative_tokens",
        )
    return tuple(rounded)


def descriptors(
    mode: GraphMode,
    sizes: Sequence[int],
    *,
    max_num_seqs: int,
    decode_query_len: int = 1,
    runner_v2: bool = True,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(PIECEWISE, FULL) descriptor token counts, largest first, as the runner captures them."""
    q = decode_query_len
    if mode is GraphMode.NONE or not sizes:
        return (), ()
    mixed = tuple(sorted(sizes, reverse=True))
    decode: list[int] = []
    if mode.separate_decode:
        top, widest = max(sizes), q * max_num_seqs
        if runner_v2:
            rounded = {_round_up(s, q) for s in sizes}
            decode = [r for r in rounded if r <= widest and r <= top and r // q <= max_num_seqs]
        else:
            decode = [s for s in sizes if q <= s <= widest]
    full = tuple(sorted(decode, reverse=True))
    if mode.mixed is GraphMode.FULL:
        return (), mixed
    if mode.mixed is GraphMode.PIECEWISE:
        return mixed, full
    return (), full


def vllm_cudagraph_captures(
    version: tuple[int, ...],
    *,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    blackwell: bool = False,
    enforce_eager: bool = False,
    num_speculative_tokens: int = 0,
    sizes: Sequence[int] | None = None,
    max_size: int | None = None,
    mode: GraphMode | None = None,
    support: GraphSupport = GraphSupport.UNIFORM_BATCH,
    runner_v2: bool = True,
    model_max: int | None = None,
) -> CudaGraphCaptures | None:
    """The graphs vLLM ``version`` captures per worker; None with ``enforce_eager`` (no graphs,
    nor an estimate); mode NONE (given, or no sizes left) is a record of no graphs.

    ``blackwell``: a data-centre Blackwell GPU (SM 10.x); ``support``: the attention backends'
    graph support (the least over the model's layers); ``runner_v2``: model runner V2 (the default
    from 0.29 on), else V1."""
    for name, value in (("max_num_seqs", max_num_seqs),
                        ("max_num_batched_tokens", max_num_batched_tokens)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(
                f"{name} must be a positive integer, got {value!r}", code="invalid-input"
            )
    if not isinstance(num_speculative_tokens, int) or num_speculative_tokens < 0:
        raise InputError(f"num_speculative_tokens must be 0 or more, got {num_speculative_tokens!r}",
                         code="invalid-input")  # fmt: skip
    check_graph_settings(sizes, max_size)
    if mode is not None and version < (0, 10):
        raise _refuse("cudagraph_mode exists from vLLM 0.10 on",
                      "plan with --engine-version 0.10 or later, or leave the mode out")  # fmt: skip
    wanted = mode or (GraphMode.FULL_AND_PIECEWISE if version >= (0, 11) else GraphMode.PIECEWISE)
    if enforce_eager:
        return None
    if wanted is GraphMode.NONE:
        return CudaGraphCaptures(source="NONE: no CUDA graphs (cudagraph_mode NONE)")
    q = 1 + num_speculative_tokens
    chosen = capture_sizes(version, max_num_seqs=max_num_seqs,
                           max_num_batched_tokens=max_num_batched_tokens, decode_query_len=q,
                           blackwell=blackwell, sizes=sizes, max_size=max_size,
                           model_max=model_max)  # fmt: skip
    resolved, why = resolve_mode(wanted, support, q)
    if not runner_v2 and resolved.full_decode and q > 1:
        chosen = spec_decode_sizes(chosen, q)
    pw, full = descriptors(resolved, chosen, max_num_seqs=max_num_seqs, decode_query_len=q,
                           runner_v2=runner_v2)  # fmt: skip
    note = f"{resolved.value}"
    if why:
        note += f" ({wanted.value} given: {why})"
    runner = "V2" if runner_v2 else "V1"
    span = f"{len(chosen)} capture sizes {chosen[0]}-{chosen[-1]}" if chosen else "no capture sizes"
    note += f", model runner {runner}, {span}"
    if q > 1:
        note += f", decode query length {q}"
    return CudaGraphCaptures(
        piecewise_graphs=len(pw), full_graphs=len(full),
        largest_piecewise_tokens=pw[0] if pw else 0, largest_full_tokens=full[0] if full else 0,
        source=note, runner_v2=runner_v2,
    )  # fmt: skip


def check_graph_settings(
    sizes: Sequence[int] | None, max_size: int | None, *, limit: int | None = None
) -> tuple[int, ...] | None:
    """The capture sizes as a tuple, both settings checked: one or more whole numbers of at least
    1 (and at most ``limit``), as vLLM's config accepts them."""

    def bad(value: object) -> bool:
        return (isinstance(value, bool) or not isinstance(value, int) or value < 1
                or (limit is not None and value > limit))  # fmt: skip

    if sizes is not None:
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (list, tuple)) or not sizes:
            raise _refuse(f"cudagraph_capture_sizes needs a list of one or more sizes, got {sizes!r}",
                          "e.g. --cudagraph-capture-sizes 1,2,4,8")  # fmt: skip
        for s in sizes:
            if bad(s):
                raise _refuse(f"cudagraph_capture_sizes must be positive integers, got {s!r}",
                              "e.g. --cudagraph-capture-sizes 1,2,4,8")  # fmt: skip
    if max_size is not None and bad(max_size):
        raise _refuse(f"max_cudagraph_capture_size must be a positive integer, got {max_size!r}",
                      "e.g. --max-cudagraph-capture-size 256")  # fmt: skip
    return None if sizes is None else tuple(sizes)
