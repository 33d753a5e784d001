"""kvcalc's vLLM engine equals vLLM 0.33.0's own sizing of every public config, or refuses by name.

``fixtures/vllm_0_33/reference_configs.json`` was recorded with the vLLM reference harness (a tool
beside the project; ``docs/engines.md`` says how to re-record) for every bundled model and every
public config collected for issue 13: auto/fp8 × TP 1/8 × 4,096/32,768 tokens × 20 GiB per GPU on an
emulated H100, the model's own derived maximum length (and vLLM's refusal of a length far above
it), and a B200 pass. Each entry carries the config it was recorded from.

Every scenario vLLM sizes must match: block size, blocks, tokens, concurrency to 0.005, every group
(its kind, its layers, its page and block size) and the cache's storage dtypes. Every scenario vLLM
refuses must be refused for the same reason: vLLM's error text and kvcalc's error code (or its
plan's refusal) are each mapped to one of the reason classes below, and a refusal for another reason
fails. Families kvcalc does not model yet are listed in ONE set below and must be refused by name
(``config-unverified``) — never skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_sized, refusal_class, vllm_cache_dtypes

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest, KvCachePlan
from kvcalc.errors import ConfigError, KvcalcError
from kvcalc.hfconfig import parse_config
from kvcalc.model.attention_layouts import SparseMLA
from kvcalc.model.layouts import LayerKind
from kvcalc.units import GIB

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "reference_configs.json"
DATA = json.loads(FIXTURE.read_text())
#: the same harness's record of the sparse-attention families, with each group's whole page
ATTENTION = json.loads((FIXTURE.parent / "attention_families.json").read_text())["models"]
GPUS = {
    "h100": {"gpu_memory_bytes": 80 * GIB, "gpu_name": "NVIDIA H100 80GB HBM3",
             "gpu_compute_capability": (9, 0)},
    "b200": {"gpu_memory_bytes": 180 * 10**9, "gpu_name": "NVIDIA B200",
             "gpu_compute_capability": (10, 0)},
}  # fmt: skip

#: NOT YET MODELLED: configs kvcalc must refuse by name (config-unverified) until their family
#: lands; remove an entry when its family is registered — its scenarios must then match.
NOT_YET_MODELLED = {
    "stepfun-ai--Step-3.7-Flash.json",  # step3p7: also refused by vLLM 0.33 itself (architecture)
}


def _sid(row: dict) -> str:
    length = row["max_model_len"] if row["max_model_len"] is not None else "derived"
    return f"{row['gpu']}-{row['kv_cache_dtype']}-tp{row['tensor_parallel_size']}-{length}"


CASES = [
    pytest.param(name, row, id=f"{name[:-5]}-{_sid(row)}")
    for name, model in DATA["models"].items()
    for row in model["scenarios"]
]


def _model(name: str):
    m = DATA["models"][name]
    return parse_config(m["config"], name=name, hf_quant_config=m.get("hf_quant_config"))


def _plan(name: str, row: dict):
    model = _model(name)
    length = row["max_model_len"] or row.get("derived_max_model_len") or model.max_model_len
    return get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=length, kv_cache_dtype=row["kv_cache_dtype"],
            tensor_parallel_size=row["tensor_parallel_size"],
            available_kv_bytes=row["available_kv_bytes"], **GPUS[row["gpu"]],
        )
    )  # fmt: skip


def test_grid_is_complete():
    for name, model in DATA["models"].items():
        ids = {_sid(r) for r in model["scenarios"]}
        grid = {
            f"h100-{d}-tp{t}-{n}" for d in ("auto", "fp8") for t in (1, 8) for n in (4096, 32768)
        }
        assert grid <= ids, name
        assert "h100-auto-tp1-derived" in ids, name


def test_not_yet_modelled_are_refused_by_name():
    for name in NOT_YET_MODELLED:
        with pytest.raises(ConfigError) as refused:
            _model(name)
        assert refused.value.code == "config-unverified"
        assert repr(DATA["models"][name]["config"]["model_type"]) in refused.value.message


#: vLLM's spec kinds (``get_kv_cache_spec_kind``) as kvcalc's group kinds: a ``MambaSpec`` group is
#: recurrent; DeepSeek-V4's sliding-window MLA caches are sliding groups
KINDS = {"full": LayerKind.FULL, "sliding": LayerKind.SLIDING, "chunked": LayerKind.CHUNKED,
         "mla": LayerKind.MLA, "mamba": LayerKind.RECURRENT,
         "sliding_window_mla": LayerKind.SLIDING}  # fmt: skip

#: why an engine refuses a scenario, as a class both sides are mapped to
LENGTH, PARALLELISM, KV_MEMORY, ARCHITECTURE = "max-model-len", "parallelism", "kv-memory", "arch"
#: vLLM's error texts (the harness records the exception's message) → the class
VLLM_REASONS = {
    "User-specified max_model_len": LENGTH,  # config/model.py _get_and_verify_max_len
    "must be divisible by tensor parallel size": PARALLELISM,  # verify_with_parallel_config
    "To serve at least one request with the model's max seq len": KV_MEMORY,  # kv_cache_utils
    "are not supported for now": ARCHITECTURE,  # model_executor/models/registry.py
}
#: kvcalc's error codes → the class
KVCALC_CODES = {
    "max-model-len-exceeded": LENGTH,
    "invalid-parallelism": PARALLELISM,
    "config-unverified": ARCHITECTURE,
    "unsupported-model": ARCHITECTURE,
}


def vllm_reason(text: str) -> str:
    classes = {c for marker, c in VLLM_REASONS.items() if marker in text}
    assert len(classes) == 1, f"vLLM's refusal maps to no single reason class: {text}"
    return classes.pop()


def kvcalc_reason(name: str, row: dict) -> str:
    """The class of kvcalc's refusal: its error code, or its plan's wont-start / no-fit verdict."""
    return refusal_class(lambda: _plan(name, row), KVCALC_CODES)


def _vllm_layers_per_layer(name: str, layer_indices: tuple[int, ...]) -> int:
    """vLLM registers a sparse-MLA layer's indexer key cache as a KV layer of its own
    (``DeepseekV32IndexerCache``, model_executor/models/deepseek_v2.py): two KV layers where kvcalc
    holds one layer with both caches."""
    layers = _model(name).layers
    return 2 if all(isinstance(layers[i], SparseMLA) for i in layer_indices) else 1


def _whole_pages(name: str, row: dict) -> list[int] | None:
    """The page of each group as the harness's ``worker_group_page_size_bytes`` (a uniform-type
    group's page sums its layers' pages; this fixture keeps one layer's), from the sparse-attention
    fixture's record of the same config on the same GPU, dtype and TP (the page does not depend on
    the length)."""
    if name not in ATTENTION:
        return None
    assert ATTENTION[name]["config"] == DATA["models"][name]["config"]
    pages = {
        tuple(g[2] for g in r["groups"])
        for r in ATTENTION[name]["scenarios"]
        if "groups" in r
        and (r["gpu"], r["kv_cache_dtype"], r["tensor_parallel_size"])
        == (row["gpu"], row["kv_cache_dtype"], row["tensor_parallel_size"])
    }
    assert len(pages) == 1, (name, pages)
    return list(pages.pop())


def assert_groups_match(name: str, row: dict, p: KvCachePlan) -> None:
    """Each group's kind, layers (vLLM counts real layers; kvcalc's include the padding ones),
    page and block size, in vLLM's group order."""
    got, want = [], []
    for i, (g, (kind, layers, page, block)) in enumerate(zip(p.groups, row["groups"], strict=True)):
        per_layer = _vllm_layers_per_layer(name, g.layer_indices)
        real = g.num_layers - g.padding_layers
        # vLLM makes a group of layers with unlike specs a UniformTypeKVCacheSpecs: kvcalc's
        # uniform-type groups, and the sparse-MLA layers that vLLM splits in two
        uniform = g.uniform_type or per_layer > 1
        if not uniform:  # one spec per group: the page is one layer's, as kvcalc's is
            got.append((g.kind, real, g.page_bytes, g.block_size))
            want.append((KINDS[kind], layers, page, block))
        else:  # this fixture keeps one layer's page: compare the group's whole page
            whole = _whole_pages(name, row)
            assert whole is not None, f"{name}: no record of the uniform-type group's page"
            got_page = g.page_bytes if g.uniform_type else g.page_bytes * real
            got.append((g.kind, real * per_layer, got_page, g.block_size))
            want.append((KINDS[kind], layers, whole[i], block))
    assert got == want


def assert_cache_dtype_matches(name: str, row: dict, p: KvCachePlan) -> None:
    """The torch dtypes of vLLM's attention caches (:func:`helpers.vllm_cache_dtypes`)."""
    assert vllm_cache_dtypes(_model(name).layers, p.kv_cache_dtype) == row["cache_dtype"]


@pytest.mark.parametrize(("name", "row"), CASES)
def test_matches_vllm(name, row):
    if name in NOT_YET_MODELLED:  # refused by name, never sized by a guess
        with pytest.raises(ConfigError) as refused:
            _model(name)
        assert refused.value.code == "config-unverified"
        if "refused" in row:  # vLLM 0.33 does not register the architecture either
            assert vllm_reason(row["refused"]["reason"]) == ARCHITECTURE
        return
    if "refused" in row:
        reason = row["refused"]["reason"]
        assert kvcalc_reason(name, row) == vllm_reason(reason), reason
        if reason.startswith("User-specified max_model_len"):
            # vLLM's sentence with its detail: the key, the derived length, model_max_length
            try:
                said = _plan(name, row).refusal or ""
            except KvcalcError as refused:
                said = refused.message.removeprefix("vLLM refuses to start: ")
            assert said.startswith(reason.split(" To allow")[0])
        return
    p = _plan(name, row)
    if row.get("derived_max_model_len"):
        assert _model(name).max_model_len == row["derived_max_model_len"]
    assert_sized(p, row)
    assert_groups_match(name, row, p)
    assert_cache_dtype_matches(name, row, p)


def test_every_refusal_reason_in_the_fixture_is_classed():
    texts = {r["refused"]["reason"] for _, r in (c.values for c in CASES) if "refused" in r}
    assert {vllm_reason(t) for t in texts} == {LENGTH, PARALLELISM, KV_MEMORY, ARCHITECTURE}


def test_the_length_is_refused_before_the_heads_as_vllm_does():
    # gpt2 (12 heads, 1,024 positions) at TP 8 and 4,096 tokens: vLLM's ModelConfig refuses the
    # length before VllmConfig checks the heads (recorded: "User-specified max_model_len (4096)")
    row = next(
        r for r in DATA["models"]["openai-community--gpt2.json"]["scenarios"]
        if r["tensor_parallel_size"] == 8 and r["max_model_len"] == 4096
    )  # fmt: skip
    assert row["refused"]["reason"].startswith("User-specified max_model_len (4096)")
    with pytest.raises(KvcalcError) as refused:
        _plan("openai-community--gpt2.json", row)
    assert refused.value.code == "max-model-len-exceeded"
    assert "12 attention heads are not divisible by tensor_parallel_size 8" in refused.value.hint
