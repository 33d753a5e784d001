"""``kvcalc verify --engine hf --run`` on CPU: transformers builds the model (random weights, fewer
layers, small vocabulary and MLP) and generates with its own cache; the cache's storage bytes must
match the ``hf`` engine's prediction for the installed transformers version."""

from __future__ import annotations

from pathlib import Path

import pytest
from verify_helpers import needs_transformers

pytestmark = needs_transformers


@pytest.mark.parametrize(
    ("model", "layers", "kinds"),
    [
        ("llama-3.2-1b-instruct", 2, {"full K", "full V"}),  # GQA: 8 KV heads of 64
        (
            "gemma-3-1b-it",
            6,
            {"sliding K", "sliding V", "full K", "full V"},
        ),  # 5 sliding (512) + 1 full
        ("deepseek-v3", 2, {"mla latent", "mla rope"}),  # transformers 5 caches the 512 + 64 latent
    ],
)
def test_run_matches_the_hf_prediction(cli, model, layers, kinds):
    r = cli("verify", model, "--engine", "hf", "--run", "--layers", str(layers), "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    data = r.json
    assert data["check"] == "run" and data["passed"] and data["num_layers"] == layers
    assert {c["name"] for c in data["components"]} == kinds
    run = data["run"]
    assert run["cached_tokens"] == run["prompt_tokens"] + run["new_tokens"] - 1
    assert abs(data["relative_error"]) <= 0.01
    if model == "gemma-3-1b-it":
        # the prompt overflows the 512-token window; DynamicSlidingWindowLayer keeps a 511-token view
        # of the 512-token result of its last torch.cat: one token per layer beyond the prediction
        sliding = next(c for c in data["components"] if c["name"] == "sliding K")
        assert sliding["measured_bytes"] - sliding["predicted_bytes"] == 5 * 256 * 2
        assert run["logical_bytes"] == data["predicted_bytes"]
    else:
        assert data["measured_bytes"] == data["predicted_bytes"]
    if model == "deepseek-v3":  # cached tokens × 2 layers × (512 + 64) × 2 B, not per-head K/V
        assert data["measured_bytes"] == run["cached_tokens"] * 2 * 576 * 2


def test_run_gated_deltanet_state(cli):
    """transformers keeps conv_kernel columns and a float32 Gated DeltaNet state (the hf engine models it)."""
    r = cli(
        "verify",
        "qwen3-next-80b-a3b-thinking",
        "--engine",
        "hf",
        "--run",
        "--layers",
        "4",
        "--json",
    )
    assert r.exit_code == 0, r.stdout + r.stderr


def test_run_static_cache_windows(cli):
    """StaticCache preallocates min(window, max_cache_len) per sliding layer: exact, no slice overhang."""
    r = cli("verify", "gemma-3-1b-it", "--engine", "hf", "--run", "--layers", "6", "-E",
            "cache_implementation=static", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stdout + r.stderr
    data = r.json
    assert data["run"]["cache_class"] == "StaticCache"
    assert (
        data["measured_bytes"]
        == data["predicted_bytes"]
        == 5 * 2 * 512 * 256 * 2 + 2 * 523 * 256 * 2
    )


def test_a_ctrl_c_after_generate_frees_the_cache(monkeypatch):
    """Ctrl-C while the cache is measured: the frame holding the cache stays in the traceback, so
    --run clears those frames (checked while the exception is still alive)."""
    import gc
    import weakref

    from helpers import bundled_config

    from kvcalc.hfconfig.reduce import slice_layers
    from kvcalc.verify import run_hf
    from kvcalc.verify.spec import VerifyOptions

    caches = []

    def interrupted(cache, parts):
        caches.append(weakref.ref(cache))
        raise KeyboardInterrupt

    monkeypatch.setattr(run_hf, "measure_cache", interrupted)
    raw = slice_layers(bundled_config("llama-3.2-1b-instruct"), 1)
    with pytest.raises(KeyboardInterrupt) as info:
        run_hf.verify_run(raw, "llama", VerifyOptions(engine="hf"), device="cpu", tolerance=0.01,
                          prompt_tokens=8, new_tokens=2)  # fmt: skip
    gc.collect()
    assert info.tb is not None and caches and caches[0]() is None


def test_absurd_prompt_tokens_are_refused_before_anything_is_built(cli):
    r = cli("verify", "llama-3.2-1b-instruct", "--engine", "hf", "--run", "--layers", "1", "--device", "cpu",
            "--prompt-tokens", str(10**12))  # fmt: skip
    assert r.exit_code == 2 and r.stderr.startswith("error[too-large]: "), r.stderr


@pytest.mark.llamacpp
def test_importing_the_llamacpp_binding_leaves_no_unclosed_file():
    """llama-cpp-python opens /dev/null twice at import and never closes it; every test run that
    imported it ended with "ResourceWarning: unclosed file <... name='/dev/null'>"."""
    import subprocess
    import sys

    code = "from kvcalc.verify.llamacpp.run import import_binding; import_binding()"
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).parent.parent)  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    assert "ResourceWarning" not in done.stderr
