"""The MHA and MLA token pools: the cell per token, the token count, the groups, the printed line.

- cell size per token (``get_cell_size_per_token``): MHA/GQA ``kv_heads_rank · (k + v) · layers ·
  dtype``; MLA ``(kv_lora_rank + rope) · layers · dtype`` with no ×2 and no TP split; hybrid SWA
  models size full and sliding layers separately;
- ``max_total_num_tokens = rest_bytes // cell``, capped by ``--max-total-tokens``, floored to the
  page size, the minimum over PP stages; ≤ 0 raises "Not enough memory";
- hybrid SWA split: ``full = total_bytes / (F·n_full + r·S·n_swa)``, ``swa = full · r``
  (``swa_full_tokens_ratio`` r, default 0.8), each floored to the page size.

Each K/V buffer holds ``tokens + page_size`` rows (the padding slot; the recorded pools' buffer
shapes show it at pages 1, 16 and 64, FlashMLA's 64 included). A request takes ``ceil(L / page)``
pages (``get_num_new_pages``). **Unconfirmed**: the PP layer split (assumed to be vLLM's
``get_pp_indices``).

Sliding bytes are split out of the cell only when ``hybrid``: on a plan that is not, ``swa_bytes``
and ``n_swa`` are 0, and its pool line and full group count every layer.

Worked example (sglang-4826, gemma-3-4b): 4 KV heads × (256 + 256) × 34 layers × 2 B = 139,264 B
per token; 834,615 tokens → K = (834,615 + 1) · 34 · 4 · 256 · 2 B = 54.12 GB (GiB, as SGLang prints).
"""

from __future__ import annotations

from kvcalc.engines.base import KvCacheGroup
from kvcalc.frozen import frozen
from kvcalc.model.layouts import WINDOWED_KINDS, LayerKind, Layout, MLALatent
from kvcalc.model.shape import ModelShape
from kvcalc.units import GIB


@frozen
class Cells:
    """Per-token bytes on one PP stage: full-attention part and sliding part."""

    full_bytes: int
    swa_bytes: int
    n_full: int
    n_swa: int
    k_bytes: int  # K side only, for the log line (MHA)
    #: a speculative draft's layers priced at the target's per-layer bytes (0: none)
    draft_bytes: int = 0
    #: the sliding layers' share of ``k_bytes`` (hybrid SWA: their own pool's K buffers)
    k_swa_bytes: int = 0


def cells(model: ModelShape, stage: range, hybrid: bool, draft_layers: int) -> Cells:
    """The cell of the layers in ``stage`` (sliding layers apart when ``hybrid``).

    ``draft_layers``: an EAGLE/EAGLE3/STANDALONE/NEXTN draft, priced as
    ``DefaultPoolConfigurator.__init__`` prices it: ``cell_size += int(cell_size · draft_layers
    / num_layers)`` (the draft assumed to share the target's per-layer bytes; DeepSeek-V3 TP 8:
    70,272 + int(70,272 · 1 / 61) = 71,424 B, recorded).
    """
    full = swa = n_full = n_swa = k_bytes = k_swa = 0
    for i in stage:
        layer: Layout = model.layers[i]
        if not layer.bytes_per_token:
            continue
        k = 0 if isinstance(layer, MLALatent) else (
            layer.num_kv_heads * layer.dtype.row_bytes(layer.head_dim_k))  # fmt: skip
        k_bytes += k
        if hybrid and layer.kind in WINDOWED_KINDS:
            swa, n_swa, k_swa = swa + layer.bytes_per_token, n_swa + 1, k_swa + k
        else:
            full, n_full = full + layer.bytes_per_token, n_full + 1
    # a draft is planned on targets without sliding or chunked layers only (speculative.py
    # refuses the others): every layer with a cache is in ``full`` here
    draft = int(full * draft_layers / n_full) if draft_layers and n_full else 0
    return Cells(full_bytes=full, swa_bytes=swa, n_full=n_full, n_swa=n_swa, k_bytes=k_bytes,
                 draft_bytes=draft, k_swa_bytes=k_swa)  # fmt: skip


def stage_tokens(
    rest: int, c: Cells, hybrid: bool, ratio: float, cap: int | None, page: int
) -> int:
    """``max_total_num_tokens`` of one stage from its ``rest`` bytes."""
    if hybrid and c.swa_bytes:
        tokens = int(rest / (c.full_bytes + ratio * c.swa_bytes))
    else:
        # swa_bytes is 0 on this branch (not hybrid, or no sliding layer on the stage)
        cell = c.full_bytes + c.draft_bytes
        tokens = rest // cell if cell else 0
    if cap is not None:
        tokens = min(tokens, cap)
    return tokens // page * page


def pool_line(
    model: ModelShape, tokens: int, page: int, c: Cells, *, torch_dtype: str | None = None,
    counted: bool,
) -> str:  # fmt: skip
    """``KV Cache is allocated. …``: K and V sizes for MHA, one KV size for MLA. 0.5.23 names the
    dtype (``torch_dtype``); releases before March 2025 printed no ``#tokens`` and a final period
    (``counted=False``; their MLA line is unconfirmed)."""
    head = "KV Cache is allocated. " + (f"dtype: torch.{torch_dtype}, " if torch_dtype else "")
    head += f"#tokens: {tokens}, " if counted else ""
    end = "" if counted else "."
    if model.is_mla:
        size = (tokens + page) * c.full_bytes
        return f"{head}KV size: {size / GIB:.2f} GB{end}"
    k_size = (tokens + page) * c.k_bytes
    v_size = (tokens + page) * c.full_bytes - k_size  # a hybrid SWA plan: hybrid_pool_lines
    return f"{head}K size: {k_size / GIB:.2f} GB, V size: {v_size / GIB:.2f} GB{end}"


def hybrid_pool_lines(
    model: ModelShape, tokens: int, swa_tokens: int, page: int, c: Cells, *, torch_dtype: str
) -> tuple[str, ...]:
    """SGLang 0.5.23's lines for a hybrid SWA pool (``SWAKVPool.__init__``): each sub-pool's
    ``_finalize_allocation_log`` (``allocation_label`` "Full" and "SWA"), then the pool's
    ``mem_usage`` — K and V bytes of both, in GiB ("GB") — and its two sizes. Every buffer holds
    one padding page (``size + page_size`` rows)."""
    sizes: list[tuple[int, int | None]]  # (K, V) bytes of each sub-pool; V None for MLA
    if model.is_mla:
        sizes = [((tokens + page) * c.full_bytes, None), ((swa_tokens + page) * c.swa_bytes, None)]
    else:
        k_full, k_swa = c.k_bytes - c.k_swa_bytes, c.k_swa_bytes
        sizes = [((tokens + page) * k_full, (tokens + page) * (c.full_bytes - k_full)),
                 ((swa_tokens + page) * k_swa, (swa_tokens + page) * (c.swa_bytes - k_swa))]  # fmt: skip
    lines = []
    for label, n, (k, v) in zip(("Full", "SWA"), (tokens, swa_tokens), sizes, strict=True):
        head = f"{label} KV Cache is allocated. dtype: torch.{torch_dtype}, #tokens: {n}, "
        lines.append(f"{head}KV size: {k / GIB:.2f} GB" if v is None else
                     f"{head}K size: {k / GIB:.2f} GB, V size: {v / GIB:.2f} GB")  # fmt: skip
    usage = sum(k + (v or 0) for k, v in sizes) / GIB
    lines.append(
        f"SWAKVPool mem usage: {usage:.2f} GB, swa size: {swa_tokens}, full size: {tokens}"
    )
    return tuple(lines)


def groups(
    c: Cells, tokens: int, swa_tokens: int, page: int, L: int, hybrid: bool
) -> tuple[KvCacheGroup, ...]:
    """One pool (two with hybrid SWA); ``page_bytes`` is per layer (the mean over the pool's layers)."""
    rows = [KvCacheGroup(
        kind=LayerKind.FULL, num_layers=c.n_full, page_bytes=page * c.full_bytes // max(1, c.n_full),
        block_size=page, blocks_per_request=-(-L // page), num_blocks=tokens // page,
    )]  # fmt: skip
    if hybrid and c.n_swa:
        rows.append(KvCacheGroup(
            kind=LayerKind.SLIDING, num_layers=c.n_swa, page_bytes=page * c.swa_bytes // c.n_swa,
            block_size=page, blocks_per_request=-(-L // page), num_blocks=swa_tokens // page,
        ))  # fmt: skip
    return tuple(rows)
