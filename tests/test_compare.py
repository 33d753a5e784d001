"""Model comparison and MHA/GQA/MQA/MLA variants (hand-computed bytes and parameter counts)."""

from __future__ import annotations

import pytest

from kvcalc.errors import InputError
from kvcalc.estimate.weights import count_parameters
from kvcalc.planning.compare import CompareEntry, attention_variants, compare
from kvcalc.planning.inputs import PlanInputs
from tests.helpers import bundled_shape

GIB = 1 << 30
SEVEN = ("qwen2.5-1.5b", "qwen2.5-7b", "llama-3.1-8b", "mistral-7b-v0.1", "qwen3-8b", "llama-3.1-70b",
         "llama-3.1-405b")  # fmt: skip


@pytest.fixture(scope="module")
def llama():
    return bundled_shape("llama-3.1-8b")


def _entries(names):
    return [CompareEntry(label=n, model=bundled_shape(n)) for n in names]


def test_variants_bytes_per_token(llama):
    mha, gqa, mqa, mla = attention_variants(llama)
    assert [v.label for v in (mha, gqa, mqa, mla)] == [
        "MHA (kv=32)",
        "GQA (kv=8, as published)",
        "MQA (kv=1)",
        "MLA (512+64)",
    ]
    assert mha.model.bytes_per_token == 2 * 32 * 32 * 128 * 2 == 524_288
    assert gqa.model is llama and gqa.model.bytes_per_token == 131_072
    assert mqa.model.bytes_per_token == 2 * 32 * 1 * 128 * 2 == 16_384
    assert mla.model.bytes_per_token == 32 * (512 + 64) * 2 == 36_864
    assert [v.model.attention_kind for v in (mha, gqa, mqa, mla)] == ["MHA", "GQA", "MQA", "MLA"]


def test_variants_change_the_attention_weights(llama):
    counts = [count_parameters(v.model.weights).total for v in attention_variants(llama)]
    base = 8_030_261_248
    # k_proj and v_proj grow from 1,024 to 4,096 rows: + 2 × 3,072 × 4,096 × 32 layers
    assert counts[0] == base + 2 * 3072 * 4096 * 32
    assert counts[1] == base
    # shrink to 128 rows: − 2 × 896 × 4,096 × 32
    assert counts[2] == base - 2 * 896 * 4096 * 32
    # MLA per layer: q 6,144 × 4,096 + kv_a 576 × 4,096 + norm 512 + kv_b 8,192 × 512 + o 4,096 × 4,096
    mla_layer = 6144 * 4096 + 576 * 4096 + 512 + 8192 * 512 + 4096 * 4096
    gqa_layer = 2 * 4096 * 4096 + 2 * 1024 * 4096
    assert counts[3] == base + 32 * (mla_layer - gqa_layer)


def test_variants_are_pure(llama):
    before = llama.bytes_per_token
    attention_variants(llama)
    assert llama.bytes_per_token == before and "[" not in llama.name


def test_variants_need_standard_attention():
    with pytest.raises(InputError) as info:
        attention_variants(bundled_shape("deepseek-v3"))
    assert info.value.code == "unsupported-model"


def test_compare_without_a_gpu_uses_the_layouts():
    result = compare(_entries(["llama-3.1-8b", "mistral-7b-v0.1"]), None, max_model_len=32768)
    llama, mistral = result.rows
    assert llama.layer_kv_bytes_per_request == 32768 * 131_072 == 4 * GIB
    assert mistral.layer_kv_bytes_per_request == 4096 * 131_072  # the 4,096-token window caps it
    assert llama.engine_kv_bytes_per_request is None and llama.kv_cache_dtype == "bf16"
    assert result.inputs["kv_cache_dtype"] == "auto"
    assert llama.status == "no GPU given" and llama.fits is None and llama.max_concurrency is None
    # bf16 weights + RoPE cache + 32 attention layers' four fp32 scales
    assert llama.weights_bytes == 16_060_522_496 + 33_554_432 + 32 * 16
    assert llama.num_parameters == 8_030_261_248


def test_compare_on_a_gpu_marks_what_does_not_fit():
    result = compare(_entries(SEVEN), PlanInputs(gpu="H100"), max_model_len=32768)
    by = {r.label: r for r in result.rows}
    assert [r.label for r in result.rows] == list(SEVEN)
    for name in ("llama-3.1-70b", "llama-3.1-405b"):
        assert by[name].status == "doesn't fit" and by[name].fits is False
        assert by[name].max_concurrency == 0.0 and "weights" in by[name].reason
    for name in SEVEN[:5]:
        assert by[name].fits and by[name].max_concurrency > 1
    assert by["llama-3.1-8b"].kv_bytes_per_token == 131_072
    assert by["llama-3.1-8b"].engine_kv_bytes_per_request == 4 * GIB  # 2,048 blocks × 2 MiB
    assert by["llama-3.1-8b"].layer_kv_bytes_per_request == 4 * GIB  # full attention: the same
    # Mistral's 4,096-token window: the layers hold 4,096 · 131,072 B = 512 MiB, but vLLM reserves
    # for the window plus the tokens in flight (2 × 8,192): cdiv(4,095 + 16,384, 16) + 1 = 1,281
    # blocks of 16 · 131,072 B = 2 MiB → 2,686,451,712 B (2.50 GiB)
    mistral = by["mistral-7b-v0.1"]
    assert mistral.layer_kv_bytes_per_request == 512 * (1 << 20)
    assert mistral.engine_kv_bytes_per_request == 1_281 * 2 * (1 << 20) == 2_686_451_712
    assert result.gpu == "H100-SXM" and mistral.kv_cache_dtype == "bf16"
    # smaller KV per request, more requests: Qwen2.5-1.5B (2 KV heads) beats Llama-3.1-8B
    assert by["qwen2.5-1.5b"].max_concurrency > by["llama-3.1-8b"].max_concurrency


def test_compare_notes_lengths_beyond_a_model():
    result = compare(_entries(["qwen3-1.7b"]), None, max_model_len=65536)
    assert "exceed" in result.notes[0]


def test_compare_needs_models():
    with pytest.raises(InputError):
        compare([], None, max_model_len=1024)


def test_variants_planned_on_a_gpu(llama):
    result = compare(attention_variants(llama), PlanInputs(gpu="H100"), max_model_len=32768)
    conc = [r.max_concurrency for r in result.rows]
    # fewer KV bytes per request, more requests: MQA > MLA > GQA > MHA
    assert conc[2] > conc[3] > conc[1] > conc[0] > 1


def test_compare_cli_one_row_per_engine_equal_to_each_single_engine_run(cli):
    """--engine repeated: each (model, engine) row carries exactly the figures of that engine alone."""
    args = (
        "compare",
        "llama-3.1-8b",
        "qwen3-8b",
        "--gpu",
        "H100",
        "--max-model-len",
        "32K",
        "--json",
    )
    both = cli(*args, "--engine", "vllm", "--engine", "sglang")
    assert both.exit_code == 0, both.stderr
    assert both.json["engines"] == ["vllm", "sglang"] and both.json["engine"] == "vllm"
    assert [(r["label"], r["engine"]) for r in both.json["rows"]] == [
        ("llama-3.1-8b (vllm)", "vllm"), ("llama-3.1-8b (sglang)", "sglang"),
        ("qwen3-8b (vllm)", "vllm"), ("qwen3-8b (sglang)", "sglang"),
    ]  # fmt: skip
    for engine in ("vllm", "sglang"):
        alone = cli(*args, "--engine", engine).json
        assert alone["engines"] == [engine]
        for row in alone["rows"]:
            (twin,) = [r for r in both.json["rows"] if r["label"] == f"{row['label']} ({engine})"]
            assert {**twin, "label": row["label"]} == row
    # the two engines really differ here (else the test could not tell them apart): 13.71x vs 12.62x
    llama = both.json["rows"][:2]
    assert llama[0]["max_concurrency"] != llama[1]["max_concurrency"]


def test_compare_cli_engines_without_a_gpu(cli):
    both = cli("compare", "llama-3.1-8b", "--engine", "vllm", "--engine", "llamacpp", "--json")
    assert both.exit_code == 0, both.stderr
    for row in both.json["rows"]:
        alone = cli("compare", "llama-3.1-8b", "--engine", row["engine"], "--json").json
        (single,) = alone["rows"]
        assert {**row, "label": single["label"]} == single


def test_compare_table_labels_each_engine(cli):
    out = cli("compare", "llama-3.1-8b", "--gpu", "H100", "--engine", "vllm", "--engine", "sglang")
    assert out.exit_code == 0, out.stderr
    assert "with vllm, sglang" in out.stdout
    assert "llama-3.1-8b (vllm)" in out.stdout and "llama-3.1-8b (sglang)" in out.stdout
