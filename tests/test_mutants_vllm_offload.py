"""``engines/vllm/offload.py``: the survivors of a mutation run (docs/testing.md, "Mutation
testing") killed with vLLM 0.33.0's own figures and rules.

The figures come from ``tests/fixtures/vllm_0_33/kv_offload_edges.json``, recorded with vLLM's
own ``build_offloading_config`` and ``CPUOffloadingSpec`` after its ``get_kv_cache_configs``
(chunks that are not a whole number of 4 KiB pages, ``blocks_per_chunk`` and ``block_size`` in the
extra config, ``--kv-offloading-size`` over another connector's extra config, MLA under DCP, PCP,
PP and TP 2, hybrids) and, for ``NixlConnector``'s CPU buffer, the per-layer views vLLM's
``allocate_kv_cache`` makes (``initialize_host_xfer_buffer`` allocates one host tensor of each
view's shape). The refusals and their boundaries are vLLM 0.33.0's code, cited where tested.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines.host_options import OffloadOptions
from kvcalc.engines.vllm.offload import (
    host_tier,
    native_host_kv,
    parse_kv_transfer_config,
    weight_offload,
)
from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
FIXTURE = json.loads((ROOT / "tests/fixtures/vllm_0_33/kv_offload_edges.json").read_text())
RECORDS = {r["name"]: r for r in FIXTURE["records"]}
#: the engine arguments a record was run with, as kvcalc's inputs
ARGS = {
    "kv_offloading_size": lambda v: {"kv_offloading_bytes": int(v * GIB)},
    "kv_transfer_config": lambda v: {"kv_transfer_config": json.dumps(v)},
    "decode_context_parallel_size": lambda v: {"decode_context_parallel_size": v},
    "prefill_context_parallel_size": lambda v: {"prefill_context_parallel_size": v},
    "pipeline_parallel_size": lambda v: {"pipeline_parallel_size": v},
}


def _inputs(rec: dict) -> dict:
    kw: dict = dict(gpu=rec["gpu"], tensor_parallel_size=rec["tensor_parallel_size"],
                    max_model_len=rec["max_model_len"],
                    kv_cache_memory_bytes=round(rec["kv_gib"] * GIB))  # fmt: skip
    for key, value in rec["engine_args"].items():
        kw.update(ARGS[key](value))
    return kw


def _plan(model: str, **kw):
    return plan_reference(model, PlanInputs(**kw), with_suggestions=False)


def _notes(plan) -> str:
    return "\n".join(plan.notes)


def _world(rec: dict) -> int:
    args = rec["engine_args"]
    return (rec["tensor_parallel_size"] * args.get("pipeline_parallel_size", 1)
            * args.get("prefill_context_parallel_size", 1))  # fmt: skip


NATIVE = [r for r in RECORDS.values() if "num_chunks" in r]
REFUSED = [r for r in RECORDS.values() if r["status"] != "ok"]
NIXL = [r for r in RECORDS.values() if "nixl_host_xfer_bytes_per_rank" in r]


@pytest.mark.parametrize("rec", NATIVE, ids=lambda r: r["name"])
def test_native_offloading_equals_vllms_chunks(rec):
    plan = _plan(rec["model"], **_inputs(rec))
    assert plan.num_blocks == rec["num_gpu_blocks"]
    # kvcalc's figure is vLLM's capacity over the KV-cache groups it offloads
    groups = len(rec["offload_groups"])
    assert plan.host_kv_tokens == rec["cpu_tokens"] // groups
    assert plan.host_memory_bytes == rec["num_chunks"] * rec["kv_bytes_per_chunk"]
    # the note, with vLLM's figures in it
    dcp = rec["engine_args"].get("decode_context_parallel_size", 1)
    bpc, block_tokens = rec["blocks_per_chunk"], rec["offload_groups"][0][1]
    note = (f"KV offloading (native): {rec['cpu_bytes_to_use'] / GIB:g} GiB of host memory in "
            f"{rec['num_chunks']:,} chunks of {rec['kv_bytes_per_chunk']:,} B "
            f"({rec['worker_kv_bytes_per_block']:,} B per GPU block × "
            + ("1 copy: the MLA latent is replicated on every TP rank" if rec["replicated_layout"]
               else f"{rec['world_size']} rank(s)")
            + (f" × {bpc} blocks" if bpc > 1 else "")
            + (f", blocks of {block_tokens} tokens over DCP {dcp}" if dcp > 1 else "")
            + f", 4 KiB aligned) = {rec['cpu_tokens']:,} tokens")  # fmt: skip
    if groups > 1:
        note += (f"; ÷ {groups} KV-cache groups (vLLM keys each group's chunks apart) = "
                 f"{rec['cpu_tokens'] // groups:,} tokens of every layer")  # fmt: skip
    assert note in plan.notes


@pytest.mark.parametrize("rec", REFUSED, ids=lambda r: r["name"])
def test_refused_as_vllm_refuses(rec):
    # PCP on a model without MLA: vLLM finds no attention backend (use_pcp=True)
    assert "No valid attention backend" in rec["error"]
    with pytest.raises(InputError) as err:
        _plan(rec["model"], **_inputs(rec))
    assert err.value.code == "invalid-parallelism"


def test_the_records_cover_the_edges():
    by = RECORDS
    # a chunk that is not a whole number of 4 KiB pages: 3 × 1,124,352 B padded to 3,375,104 B
    assert by["dsv3_bpc3"]["kv_bytes_per_chunk"] == 3_375_104
    assert by["dsv3_bpc3"]["worker_kv_bytes_per_block"] * 3 == 3_373_056
    # DCP shards the MLA latent: no replicated layout, 8 copies, 128-token blocks
    assert by["dsv3_dcp8"]["replicated_layout"] is False
    assert by["dsv3_dcp8"]["offload_groups"][0][1] == 128
    assert by["dsv3_tp2"]["replicated_layout"] is True
    # --kv-offloading-size keeps the extra config of the connector it replaces
    assert by["l8_size_extra"]["blocks_per_chunk"] == 5
    assert all("$VLLMENV" in r["command"] and "/work" not in r["command"] for r in by.values())


@pytest.mark.parametrize("rec", NIXL, ids=lambda r: r["name"])
def test_nixl_cpu_buffer_equals_vllms_host_buffers(rec):
    plan = _plan(rec["model"], **_inputs(rec))
    assert plan.num_blocks == rec["num_gpu_blocks"]
    world = _world(rec)
    assert plan.host_memory_bytes == rec["nixl_host_xfer_bytes_per_rank"] * world
    assert plan.host_kv_tokens is None
    assert (f"NixlConnector kv_buffer_device=cpu: the GPU KV cache mirrored in host memory "
            f"({rec['nixl_host_xfer_bytes_per_rank']:,} B × {world} GPU(s)); a transfer buffer, "
            "no extra capacity") in _notes(plan)  # fmt: skip


# --- the chunk rule's edges (CPUOffloadingSpec.__init__, build_offloading_config) ---------------


@pytest.mark.parametrize(("gpu_kv_bytes", "num_blocks"), [(0, 0), (2**21, 0), (0, 5), (4, 5)])
def test_no_gpu_block_sizes_no_chunk(gpu_kv_bytes, num_blocks):
    # build_offloading_config: worker_kv_bytes_per_block = size // num_blocks only when
    # num_blocks > 0; CPUOffloadingSpec sizes chunks only when it is > 0, else 0 chunks of 0 B
    kv = native_host_kv(8 * GIB, gpu_kv_bytes=gpu_kv_bytes, num_blocks=num_blocks, block_size=16,
                        num_groups=1, world_size=1, replicated=False)  # fmt: skip
    assert (kv.tokens, kv.host_bytes, kv.num_chunks, kv.chunk_bytes) == (0, 0, 0, 0)
    assert kv.note == "KV offloading: no GPU blocks to offload"


def test_one_byte_per_block_takes_a_whole_page():
    # round_up(1, 4096): a chunk of one 4 KiB page
    kv = native_host_kv(GIB, gpu_kv_bytes=1, num_blocks=1, block_size=16, num_groups=1,
                        world_size=1, replicated=False)  # fmt: skip
    assert (kv.chunk_bytes, kv.num_chunks, kv.tokens) == (4096, GIB // 4096, GIB // 4096 * 16)


def test_chunks_of_one_block_and_refusals_in_vllms_words():
    one = native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                         world_size=1, replicated=False, extra={"blocks_per_chunk": 1})  # fmt: skip
    assert (one.num_chunks, one.tokens) == (512, 8192)
    # blocks_per_chunk <= 0: "'blocks_per_chunk' must be greater than 0."
    for bad in (0, -1):
        with pytest.raises(InputError) as err:
            native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                           world_size=1, replicated=False, extra={"blocks_per_chunk": bad})  # fmt: skip
        assert (err.value.message, err.value.hint, err.value.code) == (
            "'blocks_per_chunk' must be greater than 0 (vLLM)", "give a positive number",
            "invalid-input")  # fmt: skip
    with pytest.raises(InputError) as err:
        native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                       world_size=1, replicated=False,
                       extra={"blocks_per_chunk": 2, "block_size": 32})  # fmt: skip
    assert (err.value.message, err.value.hint, err.value.code) == (
        "Specify only one of 'block_size' or 'blocks_per_chunk' in kv_connector_extra_config "
        "(vLLM refuses both)", "keep one of them", "invalid-input")  # fmt: skip
    with pytest.raises(InputError) as err:
        native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                       world_size=1, replicated=False, extra={"block_size": 24})  # fmt: skip
    assert (err.value.message, err.value.hint, err.value.code) == (
        "'block_size'=24 in kv_connector_extra_config must be a multiple of the GPU KV cache "
        "block size (16 tokens)", "use a multiple, or 'blocks_per_chunk'", "invalid-input")  # fmt: skip


@pytest.mark.parametrize(("bpc", "dcp"), [(2, 1), (1, 2), (2, 2)])
def test_the_note_names_two_blocks_and_dcp_2(bpc, dcp):
    kv = native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                        world_size=dcp, replicated=False, extra={"blocks_per_chunk": bpc},
                        decode_context_parallel_size=dcp)  # fmt: skip
    chunk = 2**21 * dcp * bpc
    assert kv.note == (
        f"KV offloading (native): 1 GiB of host memory in {GIB // chunk:,} chunks of {chunk:,} B "
        f"(2,097,152 B per GPU block × {dcp} rank(s)" + (f" × {bpc} blocks" if bpc > 1 else "")
        + (f", blocks of {16 * dcp} tokens over DCP {dcp}" if dcp > 1 else "")
        + f", 4 KiB aligned) = {GIB // chunk * bpc * 16 * dcp:,} tokens")  # fmt: skip


def test_block_size_is_the_dcp_block():
    # build_offloading_config checks 'block_size' against resolve_dcp_kv_block_size: 16 × 8
    with pytest.raises(InputError, match=r"block size \(128 tokens\)"):
        native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                       world_size=8, replicated=False, extra={"block_size": 64},
                       decode_context_parallel_size=8)  # fmt: skip
    kv = native_host_kv(GIB, gpu_kv_bytes=2**21, num_blocks=1, block_size=16, num_groups=1,
                        world_size=1, replicated=False, extra={"block_size": 256},
                        decode_context_parallel_size=8)  # fmt: skip
    assert (kv.num_chunks, kv.tokens) == (GIB // 2**22, GIB // 2**22 * 256)


# --- --kv-transfer-config as vLLM's KVTransferConfig reads it --------------------------------


@pytest.mark.parametrize(
    ("text", "message", "hint", "code"),
    [
        ("{not json", "--kv-transfer-config: not JSON (Expecting property name enclosed in double "
         "quotes)", 'e.g. \'{"kv_connector":"NixlConnector"}\'', "invalid-input"),
        ("[1]", "--kv-transfer-config: needs a JSON object (with kv_connector a name)",
         'e.g. \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'', "invalid-input"),
        ('{"kv_connector": 5}', "--kv-transfer-config: needs a JSON object (with kv_connector a "
         "name)", 'e.g. \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'', "invalid-input"),
        ('{"kv_connector": "MooncakeConnector"}', "--kv-transfer-config: the MooncakeConnector "
         "connector's memory is not modelled",
         "kvcalc models OffloadingConnector, NixlConnector and the LMCache connectors",
         "offload-not-modelled"),
        ('{"kv_connector": "OffloadingConnector", "kv_connector_extra_config": [1]}',
         "--kv-transfer-config: kv_connector_extra_config must be an object",
         "write it as a JSON object", "invalid-input"),
    ],
)  # fmt: skip
def test_transfer_config_refusals(text, message, hint, code):
    with pytest.raises(InputError) as err:
        parse_kv_transfer_config(text)
    assert (err.value.message, err.value.hint, err.value.code) == (message, hint, code)


def test_transfer_config_as_read():
    # KVTransferConfig.kv_buffer_device defaults to the platform's device: cuda
    nixl = parse_kv_transfer_config('{"kv_connector":"NixlConnector"}')
    assert (nixl.connector, nixl.buffer_device, nixl.extra_config) == ("NixlConnector", "cuda", {})
    # an object already parsed (a deployment file's mapping) is taken as it is
    given = parse_kv_transfer_config({"kv_connector": "NixlConnector", "kv_buffer_device": "cpu"})
    assert given.buffer_device == "cpu"
    none = parse_kv_transfer_config('{"kv_role":"kv_both"}')
    assert none.connector is None


def _tier(options: OffloadOptions, **kw):
    base = dict(gpu_kv_bytes=2**21 * 10, num_blocks=10, block_size=16, num_groups=1,
                tensor_parallel_size=1, pipeline_parallel_size=1, mla=False,
                offloaded_weight_bytes=0)  # fmt: skip
    return host_tier(options, **{**base, **kw})


def test_offloading_connector_needs_cpu_bytes_to_use():
    # CPUOffloadingSpec: "cpu_bytes_to_use must be specified in kv_connector_extra_config"
    for extra in ("{}", '{"cpu_bytes_to_use": 0}'):
        cfg = '{"kv_connector":"OffloadingConnector","kv_connector_extra_config":' + extra + "}"
        with pytest.raises(InputError) as err:
            _tier(OffloadOptions(kv_transfer_config=cfg))
        assert (err.value.message, err.value.hint, err.value.code) == (
            "OffloadingConnector: cpu_bytes_to_use must be specified in kv_connector_extra_config "
            "(vLLM refuses to start)", "add cpu_bytes_to_use, or use --kv-offloading-size GiB",
            "invalid-input")  # fmt: skip


def test_kv_offloading_size_over_another_connector_keeps_its_extra_config():
    # _post_init_kv_transfer_config sets OffloadingConnector and updates the extra config
    # (recorded: l8_size_extra, blocks_per_chunk 5 kept)
    rec = RECORDS["l8_size_extra"]
    plan = _plan(rec["model"], **_inputs(rec))
    assert ("--kv-offloading-size replaces the NixlConnector of --kv-transfer-config (vLLM's "
            "_post_init_kv_transfer_config sets its own connector)") in plan.notes  # fmt: skip
    same = _plan(rec["model"], **{**_inputs(rec), "kv_transfer_config":
                                  '{"kv_connector":"OffloadingConnector"}'})  # fmt: skip
    assert not any("replaces" in n for n in same.notes)


def test_lmcache_notes():
    backend = _tier(OffloadOptions(kv_offloading_bytes=GIB, kv_offloading_backend="lmcache"))
    assert (backend.kv_tokens, backend.kv_bytes, backend.host_bytes) == (None, None, None)
    assert backend.notes == (
        "LMCacheMPConnector (--kv-offloading-backend lmcache): the host KV pool is LMCache's (its "
        "own configuration or server), not vLLM's: its size is not known to kvcalc",)  # fmt: skip
    # LMCacheConnectorV1 with or without its own config: the pool is LMCache's either way
    for cfg in ('{"kv_connector":"LMCacheConnectorV1"}',
                '{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":'
                '{"lmcache.local_cpu": true, "lmcache.max_local_cpu_size": 5}}'):  # fmt: skip
        tier = _tier(OffloadOptions(kv_transfer_config=cfg))
        assert (tier.kv_tokens, tier.kv_bytes) == (None, None)
        assert tier.notes == (
            "LMCacheConnectorV1: the host KV pool is LMCache's (its own configuration or server), "
            "not vLLM's: its size is not known to kvcalc",)  # fmt: skip


def test_connectorless_and_gpu_registered_nixl():
    none = _tier(OffloadOptions(kv_transfer_config='{"kv_role":"kv_both"}'))
    assert (none.kv_tokens, none.kv_bytes) == (None, 0)
    assert none.notes == ("--kv-transfer-config names no kv_connector: vLLM runs no connector",)
    cuda = _tier(OffloadOptions(kv_transfer_config='{"kv_connector":"NixlConnector"}'))
    assert (cuda.kv_tokens, cuda.kv_bytes) == (None, 0)
    assert cuda.notes == ("NixlConnector kv_buffer_device=cuda: registers the GPU KV cache itself, "
                          "no host copy",)  # fmt: skip


def test_nixl_cpu_buffer_without_groups_is_the_cache():
    # a plan that names no groups: the GPU cache itself, once per GPU
    cfg = '{"kv_connector":"NixlConnector","kv_buffer_device":"cpu"}'
    tier = _tier(OffloadOptions(kv_transfer_config=cfg), tensor_parallel_size=2)
    assert (tier.kv_tokens, tier.kv_bytes) == (None, 2**21 * 10 * 2)


def test_offloading_connector_through_the_transfer_config():
    # the same chunk rule as --kv-offloading-size, with the extra config's cpu_bytes_to_use, the
    # world size, groups and block size (recorded: l8_bpc3)
    rec = RECORDS["l8_bpc3"]
    cfg = json.dumps(rec["engine_args"]["kv_transfer_config"])
    tier = _tier(OffloadOptions(kv_transfer_config=cfg), gpu_kv_bytes=2**21 * 10240,
                 num_blocks=10240)  # fmt: skip
    assert tier.kv_tokens == rec["cpu_tokens"] == 1706 * 3 * 16
    assert tier.kv_bytes == 1706 * 6_291_456
    two = _tier(OffloadOptions(kv_transfer_config=cfg), gpu_kv_bytes=2**21 * 10240,
                num_blocks=10240, num_groups=2, tensor_parallel_size=2, block_size=32)  # fmt: skip
    # 2 ranks: chunks of 2 × 3 × 2 MiB; 32-token blocks; two groups share the capacity
    assert (two.kv_bytes, two.kv_tokens) == (853 * 12_582_912, 853 * 3 * 32 // 2)


def test_transfer_config_offloading_under_dcp():
    # the --kv-transfer-config path sizes DCP's blocks as --kv-offloading-size does (dsv3_dcp8)
    rec = RECORDS["dsv3_dcp8"]
    cfg = json.dumps({"kv_connector": "OffloadingConnector",
                      "kv_connector_extra_config": {"cpu_bytes_to_use": 100 * GIB}})  # fmt: skip
    per_block = rec["worker_kv_bytes_per_block"]
    tier = _tier(OffloadOptions(kv_transfer_config=cfg), gpu_kv_bytes=per_block * 40978,
                 num_blocks=40978, tensor_parallel_size=8, mla=True,
                 decode_context_parallel_size=8)  # fmt: skip
    assert (tier.kv_tokens, tier.kv_bytes) == (
        rec["cpu_tokens"],
        rec["num_chunks"] * rec["kv_bytes_per_chunk"],
    )


@pytest.mark.parametrize(("tp", "replicated"), [(1, False), (2, True)])
def test_mla_replicated_only_above_tp_1(tp, replicated):
    # replicated_layout needs tensor_parallel_size > 1: at TP 1 the one rank's copy is counted
    # as ranks (the same bytes), at TP 2 once for both ranks
    tier = _tier(OffloadOptions(kv_offloading_bytes=GIB), mla=True, tensor_parallel_size=tp)
    assert ("1 copy: the MLA latent" in tier.notes[0]) is replicated
    assert tier.kv_tokens == GIB // 2**21 * 16


def test_weights_offloaded_over_every_gpu():
    tier = _tier(OffloadOptions(cpu_offload_bytes=GIB), offloaded_weight_bytes=1000,
                 tensor_parallel_size=4)  # fmt: skip
    assert tier.weights_bytes == 4000 and tier.host_bytes == 4000
    assert tier.notes == ("weights offloaded to host memory: 1,000 B per GPU × 4 GPU(s) = "
                          "4,000 B of pinned host memory",)  # fmt: skip


# --- --cpu-offload-gb (UVAOffloader._maybe_offload_to_cpu) ------------------------------------


def _moved(budget: int, layer_bytes: int, *, pp: int = 1, vision: bool = False):
    return weight_offload(OffloadOptions(cpu_offload_bytes=budget), layer_bytes=layer_bytes,
                          pipeline_parallel_size=pp, has_vision=vision)  # fmt: skip


NOTE = ("--cpu-offload-gb: {:,} B of parameters per GPU (the vision tower first where it has one, "
        "then the decoder layers) moved to pinned host memory in module order "
        "(model_executor/offloader/uva.py); vLLM moves the parameter that crosses the budget "
        "whole, so up to one parameter more leaves the GPU (not counted: the plan is that much "
        "pessimistic)")  # fmt: skip


def test_weight_offload_moves_up_to_the_layers():
    assert _moved(100, 1000) == (100, NOTE.format(100))
    assert _moved(1000, 1000) == (1000, NOTE.format(1000))
    assert _moved(5000, 1000) == (1000, NOTE.format(1000) + "; the budget exceeds the decoder "
                                  "layers (1,000 B): all of them moved")  # fmt: skip
    assert _moved(100, 1) == (1, NOTE.format(1) + "; the budget exceeds the decoder layers (1 B): "
                              "all of them moved")  # fmt: skip


def test_weight_offload_with_a_vision_tower():
    # the tower is offloaded too (_mark_tower_model hands it to the offloader): a budget up to
    # the decoder layers' bytes moves that many bytes whichever goes first; above, the tower's
    # share is not modelled
    assert _moved(1000, 1000, vision=True)[0] == 1000
    with pytest.raises(InputError) as err:
        _moved(1001, 1000, vision=True)
    assert (err.value.message, err.value.hint, err.value.code) == (
        "--cpu-offload-gb above the decoder layers reaches the vision tower, whose offloading is "
        "not modelled", "use a budget below the decoder layers' bytes", "offload-not-modelled")  # fmt: skip


def test_weight_offload_refusals():
    with pytest.raises(InputError) as err:
        _moved(100, 1000, pp=2)
    assert (err.value.message, err.value.hint, err.value.code) == (
        "--cpu-offload-gb with pipeline parallelism is not modelled", "plan with -pp 1",
        "offload-not-modelled")  # fmt: skip
    with pytest.raises(InputError) as err:
        _moved(100, 0)
    assert (err.value.message, err.value.hint, err.value.code) == (
        "--cpu-offload-gb needs the decoder layers' bytes, which this plan lacks",
        "plan without --cpu-offload-gb and lower --weights-memory by hand", "offload-not-modelled")  # fmt: skip
