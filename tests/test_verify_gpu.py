"""GPU checks of ``kvcalc verify`` (marker ``gpu``; skipped without CUDA). Run: ``python -m pytest -m gpu``.

- allocated CUDA bytes (``memory_allocated`` delta) equal the prediction for every engine layout;
- ``--fill`` never leaves memory allocated, also after an out-of-memory error (provoked through the
  ``oversubscribe_bytes`` test hook), an exception or a Ctrl-C (KeyboardInterrupt) half-way; nor
  does the layout check after a Ctrl-C.
"""

from __future__ import annotations

import pytest
from helpers import bundled_shape
from verify_helpers import cuda_available

from kvcalc.verify.spec import VerifyOptions

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda_available(), reason="needs an NVIDIA GPU (CUDA)"),
]

CASES = [
    ("llama-3.1-8b", "vllm", "auto"),
    ("llama-3.1-8b", "vllm", "fp8"),
    ("qwen3-8b", "vllm", "int8_per_token_head"),
    ("deepseek-v3", "vllm", "auto"),
    ("deepseek-v3", "vllm", "fp8_ds_mla"),
    ("gemma-3-1b-it", "vllm", "auto"),
    ("qwen3-next-80b-a3b-thinking", "vllm", "auto"),
    ("nvidia-nemotron-3-nano-30b-a3b-bf16", "vllm", "auto"),
    ("gpt-oss-20b", "hf", "auto"),
    ("deepseek-v3", "hf", "auto"),
    ("gemma-3-1b-it", "llamacpp", "q8_0"),
    ("llama-3.1-8b", "sglang", "fp8"),
]


def allocated() -> int:
    import torch

    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


@pytest.mark.parametrize(("alias", "engine", "dtype"), CASES)
def test_cuda_allocation_equals_prediction(alias, engine, dtype):
    from kvcalc.verify.check import verify_layout

    before = allocated()
    r = verify_layout(bundled_shape(alias), VerifyOptions(engine=engine, kv_cache_dtype=dtype, num_blocks=64),
                      device="cuda")  # fmt: skip
    assert r.device.startswith("cuda") and r.judged_on.startswith("torch.cuda.memory_allocated")
    assert r.memory.storage_bytes == r.predicted_bytes
    # the caching allocator rounds each tensor up to 512 B: well inside 0.1 %
    assert abs(r.relative_error) < 1e-3 and r.passed, r.notes
    assert r.memory.leaked_bytes == 0 and allocated() == before


def test_fill_plans_and_frees():
    from kvcalc.verify.fill import verify_fill

    before = allocated()
    r = verify_fill(bundled_shape("llama-3.2-1b-instruct"), VerifyOptions(), device="cuda")
    f = r.fill
    assert f.planned_num_blocks > 0 and f.allocatable_num_blocks > 0 and f.headroom_bytes >= 0
    assert f.bytes_per_block == 16 * 16 * 2 * 8 * 64 * 2  # 16 layers × page 2·16·8·64·2
    assert f.measured_non_torch_bytes > 0 and not f.oom_caught
    assert f.leaked_bytes == 0 and allocated() == before


def test_fill_survives_out_of_memory():
    import torch

    from kvcalc.verify.fill import verify_fill

    before = allocated()
    free_before = torch.cuda.mem_get_info()[0]
    r = verify_fill(bundled_shape("llama-3.2-1b-instruct"), VerifyOptions(), device="cuda",
                    oversubscribe_bytes=1 << 40)  # asks for 1 TiB more than is free  # fmt: skip
    assert r.fill.oom_caught and not r.passed
    assert r.fill.leaked_bytes == 0 and allocated() == before
    torch.cuda.empty_cache()
    assert torch.cuda.mem_get_info()[0] >= free_before - (64 << 20)


def test_fill_frees_after_an_exception(monkeypatch):
    from kvcalc.verify import fill

    def boom(*args, **kwargs):
        raise RuntimeError("simulated failure after the weights and reserve were allocated")

    monkeypatch.setattr(fill, "_fill_cache", boom)
    before = allocated()
    with pytest.raises(RuntimeError, match="simulated"):
        fill.verify_fill(bundled_shape("llama-3.2-1b-instruct"), VerifyOptions(), device="cuda")
    assert allocated() == before


@pytest.mark.parametrize("where", ["fill", "layout"])
def test_nothing_stays_allocated_after_an_interrupt(monkeypatch, where):
    """Ctrl-C (KeyboardInterrupt) half-way, checked while the exception and its traceback are still
    alive: the frames it passed through must not keep a CUDA buffer (CPU simulation:
    test_verify_fill_sim.py)."""
    from kvcalc.verify import alloc, fill
    from kvcalc.verify.check import verify_layout

    calls = []

    def interrupt_on_the_second(real):
        def wrapper(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        return wrapper

    shape = bundled_shape("llama-3.2-1b-instruct")
    before = allocated()
    if where == "fill":
        monkeypatch.setattr(fill._Pool, "take", interrupt_on_the_second(fill._Pool.take))
        with pytest.raises(KeyboardInterrupt) as info:
            fill.verify_fill(shape, VerifyOptions(), device="cuda")
    else:
        monkeypatch.setattr(alloc, "_views", interrupt_on_the_second(alloc._views))
        with pytest.raises(KeyboardInterrupt) as info:
            verify_layout(shape, VerifyOptions(num_blocks=64), device="cuda")
    assert len(calls) == 2 and info.tb is not None
    assert allocated() == before


def test_cli_fill_json(cli):
    r = cli("verify", "qwen3-0.6b", "--fill", "--json")
    assert r.exit_code in (0, 1), r.stderr
    data = r.json
    assert data["check"] == "fill" and data["fill"]["leaked_bytes"] == 0
    assert data["fill"]["planned_num_blocks"] > 0


def test_run_hf_on_cuda(cli):
    r = cli("verify", "gemma-3-1b-it", "--engine", "hf", "--run", "--layers", "6", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert r.json["device"].startswith("cuda")
