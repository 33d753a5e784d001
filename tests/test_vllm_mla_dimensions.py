"""vLLM 0.33 serves MLA only at the head dimensions its MLA prefill backends take
(``kvcalc/engines/vllm/refused.py`` ``MLA_PREFILL_DIMENSIONS``): any other (qk_nope, qk_rope, v)
stops the model build with "No valid MLA prefill backend found". Every record of
``tests/fixtures/vllm_0_33/mla_prefill_dimensions.json`` is vLLM's own answer for DeepSeek-V3 with
its MLA heads changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import bundled_config, config_folder

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs

RECORDS = json.loads(
    (Path(__file__).parent / "fixtures/vllm_0_33/mla_prefill_dimensions.json").read_text()
)["records"]
GPUS = {"h100": "H100-80GB", "b200": "B200"}


def _plan(record: dict):
    config = dict(bundled_config("deepseek-v3"), **record["config_change"])
    inputs = PlanInputs(gpu=GPUS[record["gpu"]], tensor_parallel_size=8,
                        max_model_len=record["max_model_len"],
                        kv_cache_memory_bytes=record["kv_memory_bytes"])  # fmt: skip
    return plan_reference(config_folder(config, "kvcalc-mla-"), inputs, with_suggestions=False)


def test_the_recordings():
    assert sorted((tuple(r["mla_dimensions"]), r["gpu"], r["status"]) for r in RECORDS) == [
        ((64, 64, 64), "h100", "rejected"), ((64, 64, 128), "b200", "ok"),
        ((64, 64, 128), "h100", "ok"), ((128, 32, 128), "h100", "rejected"),
    ]  # fmt: skip


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r['mla_dimensions']}-{r['gpu']}")
def test_kvcalc_equals_vllm(record):
    if record["status"] != "ok":
        assert record["failed_stage"] == "initialize_model"
        assert record["rejection_reason"].startswith("No valid MLA prefill backend found")
        with pytest.raises(InputError) as err:
            _plan(record)
        assert err.value.code == "unsupported-model"
        nope, rope, v = record["mla_dimensions"]
        assert "No valid MLA prefill backend found" in err.value.message
        assert (
            f"qk_nope_head_dim={nope}, qk_rope_head_dim={rope}, v_head_dim={v}" in err.value.message
        )
        return
    result = _plan(record)
    assert (result.block_size, result.num_blocks, result.kv_cache_tokens) == (
        record["block_size"], record["num_blocks"], record["kv_cache_tokens"],
    )  # fmt: skip
    assert record["log_line"] in result.log_lines


def test_the_served_shapes_plan():
    # DeepSeek-V3's own (128, 64, 128): 61 layers × (512 + 64) × 2 B = 70,272 B a token, the latent
    # whole on each of 8 ranks
    inputs = PlanInputs(gpu="H100-80GB", tensor_parallel_size=8, max_model_len=4096,
                        kv_cache_memory_bytes=20 << 30)  # fmt: skip
    assert (
        plan_reference("deepseek-v3", inputs, with_suggestions=False).kv_bytes_per_token == 70_272
    )
