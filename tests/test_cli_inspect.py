"""`kvcalc inspect` and `kvcalc models`: golden output, JSON keys, exit codes."""

from __future__ import annotations

import json

import pytest
from golden import assert_golden

from kvcalc.sources.bundled import bundled_models


def test_inspect_table_golden(cli):
    result = cli("inspect", "llama-3.1-8b", "--max-model-len", "32768")
    assert result.exit_code == 0, result.stderr
    assert_golden("inspect_llama31_8b", result)


def test_inspect_hybrid_explain_golden(cli):
    result = cli("inspect", "gpt-oss-20b", "--explain", "--kv-cache-dtype", "fp8")
    assert result.exit_code == 0, result.stderr
    assert_golden("inspect_gpt_oss_20b_fp8_explain", result)


def test_inspect_recurrent_golden(cli):
    result = cli("inspect", "qwen3-next-80b-a3b-thinking", "--max-model-len", "4096")
    assert result.exit_code == 0, result.stderr
    assert_golden("inspect_qwen3_next", result)


def test_inspect_json_keys(cli):
    result = cli("inspect", "gemma-3-1b-it", "--json", "--max-model-len", "32768")
    assert result.exit_code == 0, result.stderr
    data = result.json
    for key in ("model", "num_layers", "layers", "kv_cache_dtype", "kv_bytes_per_token",
                "layer_kv_bytes_per_request", "state_bytes_per_request", "model_source"):  # fmt: skip
        assert key in data
    assert data["num_layers"] == 26 == len(data["layers"])
    for layer in data["layers"]:
        assert set(layer) >= {
            "kind",
            "num_kv_heads",
            "head_dim_k",
            "head_dim_v",
            "window",
            "bytes_per_token",
        }
    assert data["layers"][5]["kind"] == "full" and data["layers"][5]["window"] is None
    assert data["layers"][0]["window"] == 512
    # 4 full · 32,768 · 1,024 B + 22 sliding · 512 · 1,024 B = 145,752,064
    assert data["layer_kv_bytes_per_request"] == 145_752_064
    assert data["kv_bytes_per_token"] == 26_624
    assert data["kv_cache_dtype"] == "bf16"


def test_inspect_json_state(cli):
    data = cli(
        "inspect", "nvidia-nemotron-3-nano-30b-a3b-bf16", "--json", "--max-model-len", "1000"
    ).json
    # 23 Mamba2 layers · 2,134,016 B
    assert data["state_bytes_per_request"] == 49_082_368
    # 6 attention layers · 2 · 2 · 128 · 2 = 6,144 B/token · 1,000 + state
    assert data["layer_kv_bytes_per_request"] == 6_144_000 + 49_082_368


def test_models_lists_every_bundled(cli):
    result = cli("models", "--json")
    assert result.exit_code == 0
    rows = result.json
    assert sorted(r["alias"] for r in rows) == sorted(m.alias for m in bundled_models())
    assert len(rows) >= 29
    by_alias = {r["alias"]: r for r in rows}
    assert by_alias["deepseek-v3"]["attention_kind"] == "MLA"
    assert by_alias["llama-3.1-8b"]["kv_bytes_per_token"] == 131_072
    # GLM-5: 78 layers · (1,152 B latent + 132 B indexer keys)
    assert by_alias["glm-5"]["kv_bytes_per_token"] == 100_152


def test_models_table(cli):
    result = cli("models")
    assert result.exit_code == 0
    assert "llama-3.1-8b" in result.stdout and "MLA" in result.stdout


@pytest.mark.parametrize(
    "args, code",
    [
        (("inspect", "no-such-model-xyz"), "model-not-found"),
        (("inspect", "llama-3.1-8b", "--kv-cache-dtype", "fp7"), "unknown-dtype"),
        (("inspect", "llama-3.1-8b", "--kv-cache-dtype", "fp8_ds_mla"), "unsupported-dtype"),
        (("inspect", "llama-3.1-8b", "--max-model-len", "0"), "invalid-input"),
        (("inspect", "/nonexistent/config.json"), "path-not-found"),
        (("inspect",), "usage"),
        (("frobnicate",), "usage"),
    ],
)
def test_errors_exit_2_with_code(cli, args, code):
    result = cli(*args)
    assert result.exit_code == 2, result
    assert result.stderr.startswith(f"error[{code}]: "), result.stderr
    assert "hint: " in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_inspect_local_config_file(cli, tmp_path):
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "hidden_size": 512, "torch_dtype": "float16", "max_position_embeddings": 2048}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for ref in (str(tmp_path), str(tmp_path / "config.json")):
        data = cli("inspect", ref, "--json").json
        # 2 layers · 2 · 2 heads · 128 · 2 B = 2,048 B/token; 2,048 tokens → 4,194,304 B
        assert data["kv_bytes_per_token"] == 2_048
        assert data["layer_kv_bytes_per_request"] == 4_194_304


def test_broken_local_config(cli, tmp_path):
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2,')
    result = cli("inspect", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error[config-malformed-json]")


def test_debug_shows_traceback_for_internal_errors(cli, monkeypatch):
    import kvcalc.planning.inspect as mod

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(mod, "inspect_loaded", boom)
    result = cli("inspect", "llama-3.1-8b")
    assert result.exit_code == 2 and result.stderr.startswith(
        "error[internal]: unexpected RuntimeError: kaboom"
    )
    assert "Traceback" not in result.stderr
    monkeypatch.setenv("KVCALC_DEBUG", "1")
    result = cli("inspect", "llama-3.1-8b")
    assert "Traceback" in result.stderr and result.exit_code == 2


def test_inspect_weights_from_local_safetensors(cli, tmp_path):
    import json as _json

    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256,
           "intermediate_size": 512, "vocab_size": 1000, "torch_dtype": "bfloat16"}  # fmt: skip
    (tmp_path / "config.json").write_text(_json.dumps(cfg))
    save_file({"model.embed_tokens.weight": torch.zeros(1000, 256, dtype=torch.bfloat16),
               "model.layers.0.mlp.experts.0.up.weight": torch.zeros(10, 10, dtype=torch.float32)},
              str(tmp_path / "model.safetensors"))  # fmt: skip
    data = cli("inspect", str(tmp_path), "--json").json
    w = data["weights"]
    # 1,000 × 256 bf16 = 512,000 B; 10 × 10 fp32 experts = 400 B
    assert w["by_dtype"] == {"BF16": {"num_parameters": 256_000, "total_bytes": 512_000},
                             "F32": {"num_parameters": 100, "total_bytes": 400}}  # fmt: skip
    assert (w["total_bytes"], w["experts_bytes"], w["non_expert_bytes"]) == (512_400, 400, 512_000)
    assert w["source"].startswith("safetensors metadata")


def test_inspect_weights_estimated_for_bundled(cli):
    w = cli("inspect", "llama-3.1-8b", "--json").json["weights"]
    # 8,030,261,248 parameters × 2 B (bf16)
    assert (w["num_parameters"], w["total_bytes"], w["source"]) == (
        8_030_261_248,
        16_060_522_496,
        "config estimate",
    )


def test_inspect_lists_each_engines_low_bit_formats(cli):
    """Every engine's 4-/8-bit formats with that engine's own bytes (one sequence at 8,192 tokens)."""
    r = cli("inspect", "llama-3.1-8b", "--max-model-len", "8192", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    rows = {(x["engine"], x["kv_cache_dtype"]): x for x in r.json["low_bit_by_engine"]}
    # vLLM: 32 · 8 · 2 · (128 + 4) = 67,584 B a token; 8,192 tokens in 512 blocks of 16
    assert rows["vllm", "int8_per_token_head"]["kv_bytes_per_token"] == 67_584
    assert rows["vllm", "int8_per_token_head"]["engine_kv_bytes_per_request"] == 67_584 * 8192
    # LMDeploy int4: 32 · 8 · 2 · (64 + 4) = 34,816; transformers int4 codes + scales: 36,864
    assert rows["lmdeploy", "turbomind_int4"]["kv_bytes_per_token"] == 34_816
    assert rows["hf", "quanto_int4"]["kv_bytes_per_token"] == 36_864
    assert {x["bits"] for x in rows.values()} == {4, 8}
    assert all(not x["refused"] for x in rows.values())
    bad = cli("inspect", "llama-3.1-8b", "--kv-cache-dtype", "int4")
    assert bad.exit_code == 2 and "error[ambiguous-dtype]" in bad.stderr


def test_inspect_and_plan_name_their_kv_accounting(cli):
    """Gemma-2-9B at 8,192 tokens, bf16: the layers hold 21 sliding · 4,096 · 8,192 B + 21 full ·
    8,192 · 8,192 B = 704,643,072 + 1,409,286,144 = 2,113,929,216 B (1.97 GiB); vLLM reserves for
    a sliding layer cdiv(min(4,095 + 16,384, 8,192), 16) + 1 = 513 blocks of 16 tokens (a window
    need not start on a block boundary), for a full one 512: 21 · 16 · 8,192 B · (513 + 512) =
    2,821,324,800 B (2.63 GiB)."""
    inspect = cli("inspect", "gemma-2-9b-it", "--max-model-len", "8K", "--json").json
    plan = cli("plan", "gemma-2-9b-it", "--gpu", "H100", "--max-model-len", "8K", "--json").json
    assert (
        inspect["layer_kv_bytes_per_request"] == plan["layer_kv_bytes_per_request"] == 2_113_929_216
    )
    assert plan["engine_kv_bytes_per_request"] == 21 * 16 * 8192 * (513 + 512) == 2_821_324_800
    table = cli("plan", "gemma-2-9b-it", "--gpu", "H100", "--max-model-len", "8K").stdout
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in table.splitlines()
        if line.count("│") == 3
    }
    assert rows["KV per request at 8,192 tokens (blocks)"] == "2.63 GiB"
    assert rows["… own bytes (windows capped, no blocks)"] == "1.97 GiB"
    text = cli("inspect", "gemma-2-9b-it", "--max-model-len", "8K").stdout
    assert "the layers' own bytes" in text and "2,113,929,216 B (1.97 GiB)" in text
