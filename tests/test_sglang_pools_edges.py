"""kvcalc's SGLang pools against SGLang 0.5.23's own sizing at the edges the other recordings miss.

``fixtures/sglang_0_5_23/pools_edges.json`` was recorded with the SGLang reference tool (its
provenance block says how): page sizes above 1 (``--page-size`` 16 and 64 on fa3, FlashMLA's 64 on
DeepSeek-V3), hybrid SWA pools (gpt-oss-20b, Llama 4 Scout) at those pages and another
``--swa-full-tokens-ratio``, a ``--max-total-tokens`` cap that is not a multiple of the page, a
one-layer model, a ``--context-length`` that is not a multiple of the page, and SWA pools at the
edge of ``validate_swa_pool_size`` with a window of 100 (not a power of two). Each entry keeps the
pool lines SGLang logged and the real pools' buffer shapes; ``pages_per_request`` is SGLang's
``get_num_new_pages`` for one request of ``seq_len`` tokens and no prefix.

Every figure is compared: the token counts of both pools, the page size of the plan and of every
group, the per-layer bytes of a page, the layer counts, ``max_running_requests``, the pages one
request takes, the bytes of the buffers SGLang allocates (``tokens + page_size`` rows each) and the
pool line it prints; a refusal by its message.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, KvCachePlan
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind
from kvcalc.units import GIB, MIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "pools_edges.json").read_text()
)
H100_BYTES = FIXTURE["gpu"]["total_mib"] * MIB
ENTRIES = FIXTURE["entries"]
#: sized by SGLang, refused by kvcalc: the radix cache off with a request cap
#: (SWARequestCapPoolConfigurator sizes the SWA pool from the cap)
NOT_MODELLED = {"gptoss20_radixoff_cap8"}
#: SGLang books every layer for every token though the model has sliding layers
#: (DefaultPoolConfigurator: Gemma 3 is no hybrid SWA model; --disable-hybrid-swa-memory)
EVERY_LAYER = {"gemma3_p64", "gptoss20_nohybrid_p64"}
OK = [
    pytest.param(e, id=e["name"])
    for e in ENTRIES
    if e["status"] == "ok" and e["name"] not in NOT_MODELLED
]
REFUSED = [pytest.param(e, id=e["name"]) for e in ENTRIES if e["status"] != "ok"]
#: (seq_len, page_size) → the pages SGLang's allocator takes for one request (get_num_new_pages)
PAGES = {(p["seq_len"], p["page_size"]): p["num_new_pages"] for p in FIXTURE["pages_per_request"]}
#: bytes of one element of SGLang's buffers, by the dtype it names
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "uint8": 1}


def _sha(config: dict) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _plan(entry: dict) -> KvCachePlan:
    config = FIXTURE["configs"][entry["config"]]
    assert _sha(config) == entry["config_sha256"]
    args = entry["server_args"]
    extra = {
        k: args[k]
        for k in ("swa_full_tokens_ratio", "max_total_tokens", "disable_radix_cache")
        if k in args
    }
    if "disable_hybrid_swa_memory" in args:  # kvcalc's switch for it
        extra["hybrid_swa"] = not args["disable_hybrid_swa_memory"]
    return get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=parse_config(config, name=entry["config"]),
            max_model_len=entry["model"]["context_len"],
            kv_cache_dtype="auto" if entry["kv_cache_dtype"] == "auto" else "fp8",
            tensor_parallel_size=entry["tp"], available_kv_bytes=int(entry["kv_memory_gib"] * GIB),
            gpu_memory_bytes=H100_BYTES, gpu_compute_capability=tuple(FIXTURE["gpu"]["cap"]),
            block_size=entry["resolved"]["page_size"], extra=extra,
            max_num_seqs=args.get("max_running_requests"),
        )
    )  # fmt: skip


def _buffer_bytes(pool: dict) -> int:
    """The bytes of every tensor buffer of a recorded pool (and of its sub-pools)."""
    total = 0
    for key, value in pool.items():
        if key.endswith("buffer") and isinstance(value, dict) and "shapes" in value:
            for s in value["shapes"]:
                total += value["count"] * math.prod(s["shape"]) * ITEMSIZE[s["dtype"]]
        elif isinstance(value, dict) and "class" in value:
            total += _buffer_bytes(value)
    return total


def test_fixture_covers_the_edges():
    pages = {e["resolved"]["page_size"] for e in ENTRIES}
    assert {1, 16, 64} <= pages
    assert {e["resolved"]["attention_backend"] for e in ENTRIES} == {"fa3", "flashmla"}
    assert {e["model"]["is_hybrid_swa"] for e in ENTRIES} == {True, False}
    assert any(e["model"]["context_len"] % e["resolved"]["page_size"] for e in ENTRIES)
    assert any(e["status"] != "ok" for e in ENTRIES) and any(
        e["model"]["sliding_window_size"] == 100 for e in ENTRIES
    )


@pytest.mark.parametrize("entry", OK)
def test_token_counts_and_pages_match_sglang(entry):
    plan = _plan(entry)
    page = entry["resolved"]["page_size"]
    cfg = entry["memory_pool_config"]
    assert plan.refusal is None
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"]
    assert plan.max_num_seqs == entry["max_running_requests"]
    assert plan.block_size == page
    by_kind = {g.kind: g for g in plan.groups}
    assert all(g.block_size == page for g in plan.groups)
    full = by_kind.get(LayerKind.FULL) or by_kind[LayerKind.MLA]
    state = entry["pool_configurator_state"]
    if entry["model"]["is_hybrid_swa"]:
        swa = by_kind[LayerKind.SLIDING]
        assert (full.num_layers, swa.num_layers) == (
            state["_full_layers_num"], state["_swa_layers_num"],
        )  # fmt: skip
        # a page of one layer: page_size · per-layer bytes (gpt-oss: 64 · 2,048 B)
        assert (full.page_bytes, swa.page_bytes) == (
            page * state["_full_per_token"], page * state["_swa_per_token"],
        )  # fmt: skip
        assert full.num_blocks * page == cfg["full_max_total_num_tokens"]
        assert swa.num_blocks * page == cfg["swa_max_total_num_tokens"]
    else:
        layers = entry["token_to_kv_pool"]["layer_num"]
        assert plan.kv_bytes_per_token == state["_cell_size"]
        assert full.num_layers == layers
        assert full.page_bytes == page * state["_cell_size"] // layers
        assert full.num_blocks * page == entry["max_total_num_tokens"]
    for g in plan.groups:  # whole pages, and the JSON contract's integers
        assert all(type(v) is int for v in (g.page_bytes, g.num_blocks, g.blocks_per_request))


@pytest.mark.parametrize("entry", OK)
def test_buffers_hold_a_padding_page(entry):
    """SGLang allocates ``tokens + page_size`` rows per buffer (the recorded shapes)."""
    pool = entry["token_to_kv_pool"]
    assert _buffer_bytes(pool) == _plan(entry).kv_cache_bytes
    if "k_buffer" in pool:
        rows = pool["k_buffer"]["shapes"][0]["shape"][0]
        assert rows == entry["max_total_num_tokens"] + entry["resolved"]["page_size"]


@pytest.mark.parametrize("entry", OK)
def test_pages_per_request_are_sglangs(entry):
    L, page = entry["model"]["context_len"], entry["resolved"]["page_size"]
    assert {g.blocks_per_request for g in _plan(entry).groups} == {PAGES[(L, page)]}


def test_pages_per_request_cover_a_length_off_the_page():
    """100,000 tokens in pages of 64: 1,562 full pages and one of 32 rows (get_num_new_pages)."""
    entry = next(e for e in ENTRIES if e["model"]["context_len"] == 100000)
    assert PAGES[(100000, entry["resolved"]["page_size"])] == 1563
    assert {g.blocks_per_request for g in _plan(entry).groups} == {1563}


@pytest.mark.parametrize("entry", [p for p in OK if not p.values[0]["model"]["is_hybrid_swa"]])
def test_pool_line_is_the_one_sglang_printed(entry):
    """``KV Cache is allocated. …`` (MHATokenToKVPool / MLATokenToKVPool), as logged."""
    (printed,) = entry["log_lines"]
    assert _plan(entry).log_lines[0] == printed


@pytest.mark.parametrize("entry", [p for p in OK if p.values[0]["model"]["is_hybrid_swa"]])
def test_hybrid_swa_pool_lines_are_the_ones_sglang_printed(entry):
    """``Full KV Cache is allocated. …``, ``SWA KV Cache is allocated. …`` and ``SWAKVPool mem
    usage: …`` (``SWAKVPool.__init__``), as logged. gpt-oss-20b, pages of 64: full (485,440 + 64)
    rows × 12 layers × 8 heads × 64 × 2 B = 5,965,873,152 B of K = 5.56 GB, SWA (388,352 + 64) ×
    the same 12,288 B = 4.45 GB; K and V of both 20.00 GB."""
    assert _plan(entry).log_lines[:3] == tuple(entry["log_lines"])


@pytest.mark.parametrize("entry", REFUSED)
def test_swa_pool_too_small_is_refused_as_sglang_refuses(entry):
    """``validate_swa_pool_size``: SWA tokens at or below ``sliding_window_size + page_size``."""
    assert entry["failed_stage"] == "resolve_memory_pool_config"
    plan = _plan(entry)
    assert not plan.fits
    assert entry["error"] == f"ValueError: {plan.refusal}"
    assert plan.log_lines == (plan.refusal,)


@pytest.mark.parametrize("entry", OK)
def test_every_layer_for_every_token_is_said(entry):
    """The note a model with sliding layers gets when SGLang sizes it as full attention."""
    notes = _plan(entry).notes
    said = "SGLang books sliding/chunked layers for every token (not a hybrid-SWA architecture)"
    assert (said in notes) == (entry["name"] in EVERY_LAYER)
    assert entry["model"]["is_hybrid_swa"] is False or entry["name"] not in EVERY_LAYER


def test_a_request_capped_swa_pool_is_refused_by_name():
    """The radix cache off and ``--max-running-requests`` given: SGLang picks
    ``SWARequestCapPoolConfigurator``, which kvcalc does not model."""
    entry = next(e for e in ENTRIES if e["name"] in NOT_MODELLED)
    assert entry["pool_configurator"] == "SWARequestCapPoolConfigurator"
    with pytest.raises(InputError) as refused:
        _plan(entry)
    assert refused.value.code == "unsupported-model"
    assert refused.value.message == (
        "sglang: with the radix cache off and --max-running-requests given, SGLang sizes the "
        f"sliding-window pool from the request cap ({entry['pool_configurator']}), which kvcalc "
        "does not model"
    )
    assert refused.value.hint == "drop -E disable_radix_cache=true or --max-num-seqs"
