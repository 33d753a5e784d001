"""kvcalc's SGLang engine against SGLang 0.5.23's own sizing of its hybrid pools, or refused by name.

``fixtures/sglang_0_5_23/hybrid.json`` was recorded with the SGLang reference tool
(``shared/tools/sglang_reference``, its ``run_scenario`` called for many scenarios in one process,
the process environment restored between them): SGLang's own ``KVCacheConfigurator`` on an
emulated H100 80GB, 20 GiB of ``rest_memory`` per GPU, auto/fp8_e4m3 × TP 1/8, for the Mamba and
linear-attention hybrids, the sliding-window families, DeepSeek sparse attention and the
multimodal wrappers. Each entry carries the SHA-256 of the config it was recorded from; the configs
themselves are the ones the vLLM fixtures embed, or (Gemma 4 E2B, reconstructed) the fixture itself.

Every scenario SGLang sizes must come out equal: ``max_total_num_tokens``, the per-token cell (or the
full and sliding cells of a hybrid SWA pool), the page size, ``max_running_requests`` at SGLang's
default ``context_length``, the Mamba-state slots and their bytes. The rest is refused by name.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, KvCachePlan
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.model.layouts import LayerKind
from kvcalc.units import GIB, MIB

HERE = Path(__file__).parent / "fixtures"
HYBRID = json.loads((HERE / "sglang_0_5_23" / "hybrid.json").read_text())
H100_BYTES = HYBRID["gpu"]["total_mib"] * MIB

#: refused under --engine sglang, and why (SGLang's own sizing code would size them)
REFUSED = {
    # SGLang's model loader stops: no SGLang class, transformers' not backend-compatible
    "ai21labs--AI21-Jamba-1.5-Mini.json": "not served by SGLang 0.5.23",
    "synthetic--bamba-defaults.json": "not served by SGLang 0.5.23",
    # DSV4PoolConfigurator: compressed C4/C128 pools, SWA ring, page 256
    "deepseek-ai--DeepSeek-V4-Flash.json": "DSV4PoolConfigurator",
}


def _configs() -> dict[tuple[str, str], tuple[dict, dict | None]]:
    """(name, sha256) → (config, hf_quant_config) from the vLLM fixtures and tests/fixtures/configs."""
    found: dict[tuple[str, str], tuple[dict, dict | None]] = {}
    for fixture in ("reference_configs", "hybrid_families", "attention_families"):
        models = json.loads((HERE / "vllm_0_33" / f"{fixture}.json").read_text())["models"]
        for name, m in models.items():
            found.setdefault((name, _sha(m["config"])), (m["config"], m.get("hf_quant_config")))
    for name, m in HYBRID["configs"].items():  # the few no vLLM fixture embeds, with their source
        found.setdefault((name, _sha(m["config"])), (m["config"], None))
    return found


def _sha(config: dict) -> str:
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


CONFIGS = _configs()
CASES = [
    pytest.param(e, id=f"{e['config'][:-5]}-tp{e['tp']}-{e['kv_cache_dtype']}")
    for e in HYBRID["entries"]
]


def _plan(entry: dict) -> KvCachePlan:
    config, sidecar = CONFIGS[(entry["config"], entry["config_sha256"])]
    assert bool(sidecar) == entry["hf_quant_config_sidecar"]
    model = parse_config(config, name=entry["config"], hf_quant_config=sidecar)
    return get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=entry.get("context_len", 4096),
            kv_cache_dtype="auto" if entry["kv_cache_dtype"] == "auto" else "fp8",
            tensor_parallel_size=entry["tp"], available_kv_bytes=int(entry["kv_memory_gib"] * GIB),
            gpu_memory_bytes=H100_BYTES, gpu_compute_capability=tuple(HYBRID["gpu"]["cap"]),
        )
    )  # fmt: skip


def test_fixture_covers_the_hybrid_scope():
    names = {e["config"] for e in HYBRID["entries"]}
    assert len(names) == 31 and len(HYBRID["entries"]) == 124
    assert all(e["status"] == "ok" for e in HYBRID["entries"])
    assert set(REFUSED) <= names
    assert all((e["config"], e["config_sha256"]) in CONFIGS for e in HYBRID["entries"])


@pytest.mark.parametrize("entry", CASES)
def test_matches_sglang(entry):
    if entry["config"] in REFUSED:
        with pytest.raises(InputError) as refused:
            _plan(entry)
        assert refused.value.code == "unsupported-model"
        assert REFUSED[entry["config"]] in str(refused.value)
        return
    plan = _plan(entry)
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"]
    assert plan.block_size == entry["page_size"]
    assert plan.max_num_seqs == entry["max_running_requests"]
    by_kind = {g.kind: g for g in plan.groups}
    if entry["is_hybrid_swa"]:
        # per-layer cells: e.g. Gemma 4 31B TP 1 bf16, global 4 heads · (512 + 512) · 2 B = 8,192 B
        full, swa = by_kind[LayerKind.FULL], by_kind[LayerKind.SLIDING]
        assert (full.num_layers, swa.num_layers) == (
            entry["full_layers_num"],
            entry["swa_layers_num"],
        )
        assert (full.page_bytes, swa.page_bytes) == (
            entry["full_per_token"],
            entry["swa_per_token"],
        )
        assert swa.num_blocks * plan.block_size == entry["swa_max_total_num_tokens"]
    else:
        # e.g. GLM-5 bf16: 78 layers · (1,152 latent + 132 indexer) B = 100,152 B
        assert plan.kv_bytes_per_token == entry["cell_size_bytes"]
    state = by_kind.get(LayerKind.RECURRENT)
    if "max_mamba_cache_size" in entry:
        assert state is not None
        assert state.num_blocks == entry["max_mamba_cache_size"]
        assert state.num_layers == entry["num_mamba_layers"]
        assert state.page_bytes * state.num_layers == entry["mamba_cache_per_req_bytes"]
        assert state.blocks_per_request == (5 if entry["enable_mamba_extra_buffer"] else 3)
    else:
        assert state is None


def test_qwen3_next_split_by_hand():
    """The first measurement of issue 18, worked through (TP 1, bf16, 20 GiB)."""
    entry = next(
        e for e in HYBRID["entries"]
        if e["config"].startswith("Qwen--Qwen3-Next") and e["tp"] == 1 and e["kv_cache_dtype"] == "auto"
    )  # fmt: skip
    plan = _plan(entry)
    # a slot: 36 GDN layers · (conv 3 · 8,192 · 2 B + state 32 · 128 · 128 · 4 B) = 77,266,944 B
    slot = 36 * (3 * 8192 * 2 + 32 * 128 * 128 * 4)
    # 20 GiB · 0.9 / 1.9 = 10,172,456,851 B → (budget − slot) // slot = 130 slots (+1 padding)
    slots = int((20 * 0.9 / 1.9 * GIB - slot) // slot)
    assert (slot, slots) == (77_266_944, 130)
    # the KV pool: 20 GiB − 131 · slot = 11,352,866,816 B // (12 layers · 2 heads · 512 · 2 B)
    assert plan.kv_cache_tokens == (20 * GIB - 131 * slot) // 24_576 == 461_949
    # max_running_requests ≤ 130 // (3 + 2 extra-buffer tracking slots) = 26
    assert plan.max_num_seqs == 26
    assert plan.kv_cache_bytes == (461_949 + 1) * 24_576 + 131 * slot
    # MambaPool's line: 131 · 36 · 3 · 8,192 · 2 B = 0.22 GiB conv, 131 · 36 · 32 · 128 · 128 · 4 B
    # = 9.21 GiB state; then the attention pool's K and V: (461,949 + 1) · 12 · 2 · 256 · 2 B,
    # and the scheduler's line with the state-capped request limit
    assert plan.log_lines == (
        "Mamba Cache is allocated. max_mamba_cache_size: 130, conv_state size: 0.22GB, "
        "ssm_state size: 9.21GB ",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 461949, K size: 5.29 GB, "
        "V size: 5.29 GB",
        "max_total_num_tokens=461949, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=26, context_len=262144",
    )


def test_multimodal_reservation():
    """Kimi-K2.5: (20 GiB − 100 MiB) // 70,272 B = 304,103; Qwen3-VL on an H100: − 1,024 MiB."""
    kimi = next(e for e in HYBRID["entries"] if e["config"] == "moonshotai--Kimi-K2.5.json")
    assert kimi["kv_budget_bytes"] == 20 * GIB - 100 * MIB
    assert _plan(kimi).kv_cache_tokens == (20 * GIB - 100 * MIB) // 70_272 == 304_103
    vl = next(e for e in HYBRID["entries"] if e["config"] == "Qwen--Qwen3-VL-8B-Instruct.json")
    assert vl["kv_budget_bytes"] == 19 * GIB
    config, _ = CONFIGS[(vl["config"], vl["config_sha256"])]
    model = parse_config(config, name=vl["config"])
    # off Hopper the large-Hopper Qwen3-VL path does not apply: 100 MiB
    a100 = get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=4096, available_kv_bytes=20 * GIB,
            gpu_memory_bytes=80 * GIB, gpu_compute_capability=(8, 0),
        )
    )  # fmt: skip
    assert a100.kv_cache_tokens == (20 * GIB - 100 * MIB) // 147_456  # 36 · 8 · 256 · 2 B


def test_state_pool_too_small_is_sglangs_refusal():
    entry = next(e for e in HYBRID["entries"] if e["config"].startswith("Qwen--Qwen3-Next"))
    config, _ = CONFIGS[(entry["config"], entry["config_sha256"])]
    plan = get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=parse_config(config, name="q"), max_model_len=4096, available_kv_bytes=100 * MIB
        )  # fmt: skip
    )
    assert plan.refusal is not None and plan.refusal.startswith(
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache."
    )
    assert not plan.fits and plan.kv_cache_tokens == 0


def test_swa_pool_too_small_is_sglangs_refusal():
    """gpt-oss-20b TP 1 bf16: cell 12 · 2,048 + 0.8 · 12 · 2,048 = 44,236.8 B; 6 MiB holds
    int(6,291,456 / 44,236.8) = 142 full tokens, int(142 · 0.8) = 113 sliding ≤ 128 + 1."""
    entry = next(e for e in HYBRID["entries"] if e["config"] == "openai--gpt-oss-20b.json")
    config, _ = CONFIGS[(entry["config"], entry["config_sha256"])]
    plan = get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=parse_config(config, name="g"), max_model_len=64, available_kv_bytes=6 * MIB
        )  # fmt: skip
    )
    assert plan.kv_cache_tokens == 142
    assert plan.refusal == (
        "SWA pool (113 tokens) cannot hold even one request: the prefill admission floor is "
        "sliding_window_size (128) + page_size (1). Increase --swa-full-tokens-ratio or the total "
        "KV budget."
    )
    assert not plan.fits


OPTIONS = json.loads((HERE / "sglang_0_5_23" / "hybrid_options.json").read_text())


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(e, id=f"{e['config'][:-5]}-tp{e['tp']}-{'-'.join(map(str, e['server_args']))}")
        for e in OPTIONS["entries"]
    ],
)
def test_state_split_options_match_sglang(entry):
    """``-E mamba_full_memory_ratio`` / ``max_mamba_cache_size`` / ``disable_radix_cache`` (and
    ``--max-running-requests`` with the radix cache off), as SGLang's ServerArgs take them."""
    extra = dict(entry["server_args"])
    running = extra.pop("max_running_requests", None)
    config, _ = CONFIGS[(entry["config"], entry["config_sha256"])]
    plan = get_engine("sglang").plan_kv_cache(
        EngineRequest(
            model=parse_config(config, name=entry["config"]), max_model_len=entry["context_len"],
            tensor_parallel_size=entry["tp"], available_kv_bytes=int(entry["kv_memory_gib"] * GIB),
            gpu_memory_bytes=H100_BYTES, extra=extra, max_num_seqs=running,
        )
    )  # fmt: skip
    state = {g.kind: g for g in plan.groups}[LayerKind.RECURRENT]
    assert plan.kv_cache_tokens == entry["max_total_num_tokens"]
    assert plan.max_num_seqs == entry["max_running_requests"]
    assert state.num_blocks == entry["max_mamba_cache_size"]
    assert plan.kv_bytes_per_token == entry["cell_size_bytes"]
    # radix cache off: one slot per request; else 5 (extra buffer) or 3
    per_request = (
        1 if entry["disable_radix_cache"] else 5 if entry["enable_mamba_extra_buffer"] else 3
    )
    assert state.blocks_per_request == per_request


def test_qwen3_next_with_64_slots_by_hand():
    """``--max-mamba-cache-size 64``, TP 1: 20 GiB − 65 · 77,266,944 B = 16,452,485,120 B
    // 24,576 B = 669,453 tokens; 64 // 5 = 12 running requests."""
    entry = next(
        e for e in OPTIONS["entries"]
        if e["server_args"] == {"max_mamba_cache_size": 64} and e["tp"] == 1
        and e["config"].startswith("Qwen--Qwen3-Next")
    )  # fmt: skip
    assert entry["kv_budget_bytes"] == 20 * GIB - 65 * 77_266_944 == 16_452_485_120
    assert (entry["max_total_num_tokens"], entry["max_running_requests"]) == (
        16_452_485_120 // 24_576,
        64 // 5,
    )


def test_bad_state_options_are_refused():
    entry = OPTIONS["entries"][0]
    config, _ = CONFIGS[(entry["config"], entry["config_sha256"])]
    model = parse_config(config, name="q")
    for extra in ({"mamba_full_memory_ratio": 0}, {"mamba_full_memory_ratio": True},
                  {"max_mamba_cache_size": 0}, {"disable_radix_cache": "yes"}):  # fmt: skip
        with pytest.raises(InputError) as err:
            get_engine("sglang").plan_kv_cache(
                EngineRequest(
                    model=model, max_model_len=4096, available_kv_bytes=20 * GIB, extra=extra
                )  # fmt: skip
            )
        assert err.value.code == "invalid-input"


def test_swa_request_cap_pool_is_refused_by_name():
    """Radix cache off + --max-running-requests: SGLang's SWARequestCapPoolConfigurator."""
    entry = next(e for e in HYBRID["entries"] if e["config"] == "openai--gpt-oss-20b.json")
    config, _ = CONFIGS[(entry["config"], entry["config_sha256"])]
    model = parse_config(config, name="g")
    request = dict(model=model, max_model_len=4096, available_kv_bytes=20 * GIB)
    get_engine("sglang").plan_kv_cache(EngineRequest(**request, max_num_seqs=64))  # the ratio split
    with pytest.raises(InputError) as err:
        get_engine("sglang").plan_kv_cache(
            EngineRequest(**request, max_num_seqs=64, extra={"disable_radix_cache": True})
        )
    assert err.value.code == "unsupported-model"
    assert "SWARequestCapPoolConfigurator" in err.value.message
