"""SGLang 0.5.23's KV dtype and record for DeepSeek sparse attention, by GPU, and kvcalc's.

``tests/fixtures/sglang_0_5_23/dsa_kv_dtypes.json`` (``scripts/sglang_flag_probe.py``): GLM-5 and
DeepSeek-V3.2, TP 1 and 8, on an emulated H100 (SM 9.0), B200 (SM 10.0) and RTX 5090 (SM 12.0), with
``--kv-cache-dtype`` auto, fp8_e4m3, bfloat16, bf16 and fp8_e5m2 (and GLM-5 on an A100, SM 8.0),
resolved and sized by SGLang's own code at a 20 GiB KV budget. SGLang stores ``auto`` as fp8 on SM 10 and newer
(``_dsa_kv_cache_dtype_default``), and a ``trtllm`` DSA backend keeps the raw latent where Hopper's
keeps the scaled 656 B record (``calculate_mla_kv_cache_dim``).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from kvcalc.errors import InputError
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import parse_serve_command
from kvcalc.units import GIB

ROOT = Path(__file__).parent
DATA = json.loads((ROOT / "fixtures" / "sglang_0_5_23" / "dsa_kv_dtypes.json").read_text())
GPUS = {"h100": "H100-SXM", "b200": "B200", "rtx5090": "RTX-5090", "a100": "A100-80GB"}
GLM5 = "zai-org--GLM-5.json"


def _config(name: str, tmp_path: Path) -> Path:
    if name == GLM5:
        models = json.loads(
            (ROOT / "fixtures" / "vllm_0_33" / "reference_configs.json").read_text()
        )
        path = tmp_path / "config.json"
        path.write_text(json.dumps(models["models"][name]["config"]))
        return path
    return ROOT / "fixtures" / "configs" / name


def _plan(config: str, argv: list[str], tmp_path: Path, *, gpu: str | None, tp: int = 1):
    command = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", str(tp)]
    read = parse_serve_command(shlex.join([*command, *argv]))
    values = {k: v for k, v in read.values.items() if k != "model"}
    inputs = replace(PlanInputs(engine="sglang", gpu=gpu, kv_cache_memory_bytes=20 * GIB), **values)
    return plan_reference(str(_config(config, tmp_path)), inputs)


def _row(config: str, gpu: str, tp: int, argv: tuple[str, ...]) -> dict:
    (row,) = [
        e for e in DATA["entries"]
        if (e["config"], e["gpu"], e["tp"], tuple(e["argv"])) == (config, gpu, tp, argv)
    ]  # fmt: skip
    return row


def test_the_recording_shows_the_rule():
    assert len(DATA["entries"]) == 2 * 3 * 2 * 5 + 3  # and GLM-5 on an A100: auto, fp8, bf16
    tokens = {
        gpu: _row(GLM5, gpu, 1, ())["max_total_num_tokens"] for gpu in ("h100", "b200", "rtx5090")
    }
    # GLM-5, 78 layers, indexer 128 + 4 B, 20 GiB = 21,474,836,480 B, in pages of 64:
    # H100 auto = bfloat16: 78 · (1,152 + 132) = 100,152 B → 214,422 → 214,400
    # B200 auto = fp8 on trtllm (raw 576 B): 78 · (576 + 132) = 55,224 B → 388,867 → 388,864
    # RTX 5090 auto = fp8 on flashinfer_sparse_mla (GLM on SM 12; the scaled 656 B):
    # 78 · (656 + 132) = 61,464 B → 349,384 → 349,376
    assert tokens == {"h100": 214_400, "b200": 388_864, "rtx5090": 349_376}
    # DeepSeek-V3.2 on SM 12 keeps trtllm: 61 · (576 + 132) = 43,188 B → 497,240 → 497,216
    assert _row("deepseek-ai--DeepSeek-V3.2.json", "rtx5090", 1, ())["max_total_num_tokens"] == (
        21_474_836_480 // (61 * 708) // 64 * 64
    )
    refused = {e["error"] for e in DATA["entries"] if e["status"] != "ok"}
    assert len(refused) == 1 and "fp8_e4m3" in refused.pop()


@pytest.mark.parametrize(
    "entry", DATA["entries"],
    ids=lambda e: f"{e['config'][:14]} {e['gpu']} tp{e['tp']} {' '.join(e['argv'][1:]) or 'auto'}",
)  # fmt: skip
def test_kvcalc_plans_sglangs_dsa_pool_by_gpu_or_refuses_as_sglang(entry, tmp_path):
    plan = lambda: _plan(  # noqa: E731
        entry["config"], entry["argv"], tmp_path, gpu=GPUS[entry["gpu"]], tp=entry["tp"]
    )
    if entry["status"] != "ok":
        with pytest.raises(InputError) as err:
            plan()
        assert err.value.code == "unsupported-dtype" and "fp8_e5m2" in err.value.message
        return
    got = plan()
    assert (got.block_size, got.kv_cache_tokens) == (
        entry["page_size"], entry["max_total_num_tokens"])  # fmt: skip


@pytest.mark.parametrize("argv", [[], ["--kv-cache-dtype", "fp8_e4m3"]])
def test_without_a_gpu_the_dtype_or_record_is_unknown_and_refused(argv, tmp_path):
    with pytest.raises(InputError) as err:
        _plan(GLM5, argv, tmp_path, gpu=None)
    assert err.value.code == "missing-gpu" and "compute capability" in err.value.message


def test_bfloat16_needs_no_gpu_and_the_default_is_noted(tmp_path):
    assert _plan(GLM5, ["--kv-cache-dtype", "bfloat16"], tmp_path, gpu=None).kv_cache_tokens == (
        214_400
    )
    notes = _plan(GLM5, [], tmp_path, gpu="B200").notes
    assert any("fp8_e4m3 on SM 10" in n for n in notes)
    # SM 8: SGLang sizes the pool (recorded: bfloat16 by default), kvcalc says the kernels are
    # unchecked there
    notes = _plan(GLM5, [], tmp_path, gpu="A100-80GB").notes
    assert any("SM 8.0" in n and "not checked" in n for n in notes)
