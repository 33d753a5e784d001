"""vLLM 0.33 on DeepSeek sparse attention by compute capability, beyond the H100 and B200.

``tests/fixtures/vllm_0_33/sparse_mla_capability.json``: GLM-5 and DeepSeek-V3.2, auto and fp8, TP 1,
4,096 tokens, 20 GiB, sized by vLLM's own code on an emulated A100 (SM 8.0: no backend serves
sparse MLA, the model is not built) and RTX 5090 (SM 12.0: FLASHINFER_MLA_SPARSE_SM120, which
stores fp8_ds_mla for auto as for fp8).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.units import GIB

ROOT = Path(__file__).parent
DATA = json.loads((ROOT / "fixtures" / "vllm_0_33" / "sparse_mla_capability.json").read_text())
GPUS = {"a100": "A100-80GB", "rtx5090": "RTX-5090"}


def _config(name: str, tmp_path: Path) -> str:
    if name == "zai-org--GLM-5.json":
        models = json.loads(
            (ROOT / "fixtures" / "vllm_0_33" / "reference_configs.json").read_text()
        )
        path = tmp_path / "config.json"
        path.write_text(json.dumps(models["models"][name]["config"]))
        return str(path)
    return str(ROOT / "fixtures" / "configs" / name)


def _plan(entry: dict, tmp_path: Path):
    inputs = PlanInputs(
        engine="vllm", gpu=GPUS[entry["gpu"]], kv_cache_memory_bytes=20 * GIB,
        max_model_len=entry["max_model_len"], kv_cache_dtype=entry["kv_cache_dtype"],
    )  # fmt: skip
    return plan_reference(_config(entry["config"], tmp_path), inputs, with_suggestions=False)


def test_the_recording():
    ok = [e for e in DATA["entries"] if e["status"] == "ok"]
    assert {e["gpu"] for e in ok} == {"rtx5090"} and len(DATA["entries"]) == 8
    # the latent page of 64 tokens in fp8_ds_mla: 64 · 656 = 41,984 B; the indexer's 64 · 132 = 8,448
    assert all(e["page_size_bytes"] == [8_448, 41_984] for e in ok)
    # GLM-5: 21,474,836,480 // (78 · (8,448 + 41,984)) = 5,459 blocks, whatever the dtype asked
    glm = {e["kv_cache_dtype"]: e["num_blocks"] for e in ok if e["config"].startswith("zai")}
    assert glm == {"auto": 21_474_836_480 // (78 * 50_432), "fp8": 5_459}
    refused = [e for e in DATA["entries"] if e["status"] != "ok"]
    assert all("No valid attention backend found" in e["error"] for e in refused)


@pytest.mark.parametrize(
    "entry", DATA["entries"], ids=lambda e: f"{e['config'][:14]} {e['gpu']} {e['kv_cache_dtype']}"
)
def test_kvcalc_plans_what_vllm_builds_and_refuses_what_it_cannot(entry, tmp_path):
    if entry["status"] != "ok":
        with pytest.raises(InputError) as err:
            _plan(entry, tmp_path)
        assert err.value.code == "unsupported-model" and "SM 8.0" in err.value.message
        return
    plan = _plan(entry, tmp_path)
    assert (plan.block_size, plan.num_blocks, plan.kv_cache_tokens) == (
        entry["block_size"], entry["num_blocks"], entry["gpu_kv_cache_size_tokens"])  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "stored"),
    # no GPU named: Hopper's rules (the H100 rows of reference_configs.json: auto stays the
    # model's bf16, not SM 10's fp8 switch for GLM-5; fp8 is stored as fp8_ds_mla)
    [("auto", "bf16"), ("fp8", "fp8_ds_mla")],
)
def test_without_a_compute_capability_hopper_is_assumed(dtype, stored, tmp_path):
    from kvcalc.engines import get_engine
    from kvcalc.engines.base import EngineRequest
    from kvcalc.hfconfig import parse_config

    config = json.loads(Path(_config("zai-org--GLM-5.json", tmp_path)).read_text())
    model = parse_config(config, name="glm-5")
    plan = get_engine("vllm").plan_kv_cache(
        EngineRequest(
            model=model, max_model_len=4096, kv_cache_dtype=dtype, available_kv_bytes=20 * GIB
        )  # fmt: skip
    )
    assert plan.kv_cache_dtype == stored and plan.block_size == 64
    assert any("Hopper SM 9.0 assumed" in n for n in plan.notes)
