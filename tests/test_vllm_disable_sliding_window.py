"""vLLM 0.33's ``--disable-sliding-window`` (``kvcalc/engines/vllm/sliding_off.py``).

``ModelConfig`` caps the derived ``max_model_len`` at the config's ``sliding_window`` and then
drops the window, so the model files build full-attention layers. Every record of
``tests/fixtures/vllm_0_33/disable_sliding_window.json`` is vLLM 0.33's own sizing with the flag
(the reference harness): blocks, tokens, concurrency and groups where it sizes, and its refusal
where the length asked is above the window.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import bundled_config, bundled_shape, config_folder

from kvcalc.engines.vllm.sliding_off import without_sliding_window
from kvcalc.errors import InputError
from kvcalc.model.layouts import LayerKind, SlidingWindow
from kvcalc.planning.api import plan_reference
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.servecmd import parse_serve_command
from kvcalc.units import GIB

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures/vllm_0_33/disable_sliding_window.json").read_text()
)
RECORDS = FIXTURE["records"]
#: vLLM's group kinds as kvcalc names them
_KINDS = {"full_attention": LayerKind.FULL, "chunked_local_attention": LayerKind.CHUNKED}


def _plan(model: str, max_model_len: int | None, **kw):
    # the KV budget as recorded; weights given so that Llama 4 Scout's do not stop the plan on one
    # H100 before its capacity line (the KV sizing does not read them)
    inputs = PlanInputs(gpu="H100-80GB", kv_cache_memory_bytes=20 * GIB, max_model_len=max_model_len,
                        weights_memory_bytes=10 * GIB, **{"disable_sliding_window": True, **kw})  # fmt: skip
    return plan_reference(model, inputs, with_suggestions=False)


def _model(record: dict) -> str:
    """A bundled name, or a folder holding the config the record was made with."""
    if "config_json" in record:
        return config_folder(record["config_json"], "kvcalc-swa-off-")
    kept = Path(__file__).parent / "fixtures/configs" / record["config"]
    return str(kept) if kept.exists() else record["model"]


def test_the_recordings():
    assert {r["config"] for r in RECORDS} == {
        "google--gemma-2-9b-it.json", "google--gemma-3-1b-it.json", "openai--gpt-oss-20b.json",
        "mistralai--Mistral-7B-v0.1.json", "meta-llama--Llama-4-Scout-17B-16E-Instruct.json",
        "mistralai--Mistral-7B-v0.1.json + rope_scaling {rope_type: linear, factor: 2.0}",
        "nvidia--Gemma-4-31B-IT-NVFP4.json", "deepseek-ai--DeepSeek-V4-Flash.json",
        "Qwen--Qwen2.5-7B.json", "Qwen--Qwen1.5-MoE-A2.7B-Chat.json", "XiaomiMiMo--MiMo-7B-Base.json",
        "Qwen--Qwen2.5-VL-7B-Instruct.json", "microsoft--Phi-3-mini-4k-instruct.json",
        "synthetic--afmoe-trinity-nano-shape.json", "synthetic--cohere2-defaults.json",
        "synthetic--cohere2-moe-defaults.json", "synthetic--exaone-moe-defaults.json",
        "synthetic--exaone4-defaults.json", "synthetic--phimoe-phi-3.5-moe-biases-window.json",
        "synthetic--step3p5-flash-shape.json", "synthetic--muse-glimmer-text-defaults.json",
        "synthetic--beam-defaults.json", "synthetic--dory-defaults.json",
        # recorded 2026-12-05: Granite SWA and its MoE serve full attention capped at the window;
        # MiMo-V2-Flash's and Laguna's config classes refuse the None within the window
        "XiaomiMiMo--MiMo-V2-Flash.json", "synthetic--granite-swa-defaults.json",
        "synthetic--granite-swa-window-4096-nope-global-32k.json",
        "synthetic--granitemoe-swa-defaults.json", "synthetic--laguna-defaults.json",
        "synthetic--laguna-swa-per-layer-heads.json",
    }  # fmt: skip
    assert len(RECORDS) == 81 and sum(r["status"] == "ok" for r in RECORDS) == 28


@pytest.mark.parametrize(
    "record", RECORDS, ids=[f"{r['model']}-{r['max_model_len']}" for r in RECORDS]
)
def test_kvcalc_equals_vllm(record):
    result = _plan(_model(record), record["max_model_len"])
    if record["status"] != "ok":
        assert result.verdict == "wont-start"
        if record["rejection_reason"].startswith("Validation error for field 'sliding_window'"):
            # Gemma 4, DeepSeek-V4, EXAONE-MoE within the window: transformers' strict config
            # class refuses the None that ModelConfig writes (the rest of the text is transformers')
            assert "Validation error for field 'sliding_window'" in result.verdict_reason
            return
        if record["rejection_reason"].startswith("Class validation error"):
            # Dory: its configuration's own validator refuses the None
            assert "sliding_window must be a positive integer" in record["rejection_reason"]
            assert "sliding_window must be a positive integer" in result.verdict_reason
            return
        if record["rejection_reason"].startswith("unsupported operand type(s) for +"):
            # Cohere2 and Cohere2-MoE: the model file adds 1 to the None (at model build)
            assert record["failed_stage"] == "initialize_model"
            assert (
                "unsupported operand type(s) for +: 'NoneType' and 'int'" in result.verdict_reason
            )
            return
        # "User-specified max_model_len (4096) is greater than the derived max_model_len
        # (sliding_window=512 ...": the same refusal, naming the derived length and its key (the
        # window, or for the Qwen2 family's cleared window the positions)
        assert "User-specified max_model_len" in record["rejection_reason"]
        derived = record["rejection_reason"].split("derived max_model_len (")[1].split(" ")[0]
        key, _, value = derived.partition("=")
        assert f"greater than the derived max_model_len ({key}={float(value)} " in (
            result.verdict_reason
        )
        return
    assert (result.block_size, result.num_blocks, result.kv_cache_tokens) == (
        record["block_size"], record["num_blocks"], record["kv_cache_tokens"],
    )  # fmt: skip
    assert round(result.max_concurrency, 6) == round(record["max_concurrency"], 6)
    assert record["log_line"] in result.log_lines
    groups = [(_KINDS[g["kind"]], g["num_layers"]) for g in record["groups"]]
    assert sorted((g.kind, g.num_layers) for g in result.groups) == sorted(groups)


def test_gemma_2_by_hand():
    # 42 layers, 8 KV heads × 256 × 2 (K, V) × 2 B = 8,192 B per layer and token; a block of 16
    # tokens holds 42 × 8,192 × 16 = 5,505,024 B; 20 GiB / 5,505,024 = 3,900 blocks (recorded)
    result = _plan("gemma-2-9b-it", 4096)
    assert result.num_blocks == 20 * GIB // (42 * 8192 * 16) == 3900
    assert result.max_concurrency == 3900 / (4096 // 16) == 15.234375


def test_the_default_length_is_the_window():
    # gemma-3-1b-it: sliding_window 512 below its 32,768 positions: vLLM derives 512
    assert _plan("gemma-3-1b-it", None).max_model_len == 512


def test_the_serving_flag_is_read():
    read = parse_serve_command("vllm serve m --disable-sliding-window")
    assert read.values["disable_sliding_window"] is True and read.unmodelled == ()


def test_unrecorded_families_and_other_engines_refuse_it():
    with pytest.raises(InputError) as err:
        _plan("qwen3-8b", 4096)
    assert err.value.code == "unmodelled-option" and "qwen3" in err.value.message
    assert "not recorded with the flag" in err.value.message
    assert err.value.hint == (
        "plan without it; recorded: afmoe, beam, exaone4, gemma2, gemma3_text, gpt_oss, "
        "granite_swa, granitemoe_swa, llama4, llama4_text, mistral, muse_glimmer_text, phi3, "
        "phimoe, step3p5"
    )
    with pytest.raises(InputError) as err:
        PlanInputs(gpu="H100-80GB", engine="sglang", disable_sliding_window=True)
    assert err.value.code == "unmodelled-option"


def test_a_rope_factor_scales_the_window():
    # vLLM replaces the config's 32,768 positions by the 4,096-token window, then multiplies by
    # the linear RoPE factor 2.0: 8,192 (recorded: 8,192 served, 16,384 refused naming
    # "sliding_window=8192.0"); comparing the window with the scaled 65,536 gives the same cap
    config = dict(
        bundled_config("mistral-7b-v0.1"), rope_scaling={"rope_type": "linear", "factor": 2.0}
    )
    folder = config_folder(config, "kvcalc-swa-off-")
    assert _plan(folder, None).max_model_len == 4096 * 2 == 8192
    plain = plan_reference(folder, PlanInputs(gpu="H100-80GB", kv_cache_memory_bytes=20 * GIB,
                                              weights_memory_bytes=10 * GIB),
                           with_suggestions=False)  # fmt: skip
    assert plain.max_model_len == 32768 * 2  # without the flag: the scaled positions
    refused = _plan(folder, 16384)
    assert refused.verdict == "wont-start"
    assert "(sliding_window=8192.0 or model_max_length=None" in refused.verdict_reason
    # a window at or above the unscaled length does not cap it: 32,768 × 2
    wide = dict(config, sliding_window=32768)
    assert _plan(config_folder(wide, "kvcalc-swa-off-"), None).max_model_len == 65536


def test_two_windows_are_refused_by_name():
    # vLLM caps the length at hf_text_config.sliding_window, one number: a config whose layers
    # kvcalc reads with two windows has no single cap to follow
    shape = bundled_shape("gemma-3-1b-it")
    layers = list(shape.layers)
    first = next(i for i, x in enumerate(layers) if isinstance(x, SlidingWindow))
    layers[first] = replace(layers[first], sliding_window=1024)
    with pytest.raises(InputError) as err:
        without_sliding_window(replace(shape, layers=tuple(layers)))
    assert err.value.code == "unmodelled-option"
    assert "2 windows (512, 1,024)" in err.value.message
    assert "vLLM caps the length at the config's one sliding_window" in err.value.message
    assert err.value.hint == "plan without it"


def test_a_draft_with_cache_layers_is_refused():
    # vLLM 0.33 builds the drafter's ModelConfig without the flag: unrecorded, so refused; an
    # n-gram draft has no cache layers and plans
    spec = json.loads((Path(__file__).parent / "fixtures/vllm_0_33/speculative.json").read_text())
    head = config_folder(spec["scenarios"]["gptoss20_eagle3_k3"]["draft_config_json"], "kvcalc-")
    eagle3 = json.dumps({"method": "eagle3", "model": head, "num_speculative_tokens": 3})
    _plan("gpt-oss-20b", 128, speculative_config=eagle3, disable_sliding_window=False)
    with pytest.raises(InputError) as err:  # planned without the flag, refused with it
        _plan("gpt-oss-20b", 128, speculative_config=eagle3)
    assert err.value.code == "unmodelled-option" and "speculative draft" in err.value.message
    ngram = '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}'
    assert _plan("gemma-2-9b-it", 4096, speculative_config=ngram).num_blocks == 3900


def test_the_qwen2_family_with_its_window_on():
    # recorded: with use_sliding_window false the config class clears the window and nothing
    # changes (Qwen2.5-7B: 23,405 blocks at 20 GiB, 4,096 and 131,072 alike); with it true the
    # window caps the length and qwen2.py refuses mixed layer types after it
    # (qwen_use_sliding_window.json, tests/test_vllm_qwen_use_sliding_window.py); Qwen2-MoE, MiMo
    # and Qwen2.5-VL the same (recorded there with max_window_layers 0 and the layer count; MiMo's
    # MiMoModel subclasses qwen2.py's Qwen2Model, whose assert refuses a mixed 14)
    on = dict(bundled_config("Qwen/Qwen2.5-7B"), use_sliding_window=True, max_window_layers=14)
    refused = _plan(config_folder(on, "kvcalc-swa-off-"), 4096)
    assert refused.verdict == "wont-start" and "Sliding window for some" in refused.verdict_reason
    mimo = dict(on, model_type="mimo", architectures=["MiMoForCausalLM"])
    refused = _plan(config_folder(mimo, "kvcalc-swa-off-"), 4096)
    assert refused.verdict == "wont-start" and "Sliding window for some" in refused.verdict_reason
    assert _plan("Qwen/Qwen2.5-7B", 131072).num_blocks == 20 * GIB // (28 * 4 * 128 * 2 * 2 * 16)


def test_a_family_whose_model_file_reads_another_key():
    # MiMo-V2-Flash: vLLM's mimo_v2.py builds its windows from sliding_window_size (128), and
    # transformers' class derives sliding_window = size + 1 = 129, which caps the length; then its
    # strict class refuses the None (recorded at 128; 512 refused by the length, naming 129)
    config = str(Path(__file__).parent / "fixtures/configs/XiaomiMiMo--MiMo-V2-Flash.json")
    at_cap = _plan(config, 129)
    assert at_cap.verdict == "wont-start" and at_cap.max_model_len == 129
    assert "Validation error for field 'sliding_window'" in at_cap.verdict_reason
    above = _plan(config, 130)
    assert "derived max_model_len (sliding_window=129.0 " in above.verdict_reason


def test_a_window_no_layer_uses_still_caps_the_length():
    # Laguna's class defaults: every layer full attention, sliding_window 512 in the config;
    # vLLM caps the length at it, then the strict class refuses the None (recorded)
    record = next(r for r in RECORDS if r["config"] == "synthetic--laguna-defaults.json")
    result = _plan(_model(record), None)
    assert result.max_model_len == 512 and result.verdict == "wont-start"


def _notes(model: str, length: int | None) -> list[str]:
    return [n for n in _plan(model, length).notes if n.startswith("--disable-sliding-window")]


def test_each_path_says_what_it_did():
    # the notes name the window and the length derived from it (what the user reads)
    assert _notes("gemma-3-1b-it", None) == [
        "--disable-sliding-window: the 512-token window layers attend to every token; the derived "
        "max_model_len is the window, 512"
    ]
    rope = dict(
        bundled_config("mistral-7b-v0.1"), rope_scaling={"rope_type": "linear", "factor": 2.0}
    )
    assert _notes(config_folder(rope, "kvcalc-swa-off-"), None) == [
        "--disable-sliding-window: the 4,096-token window layers attend to every token; the "
        "derived max_model_len is the window × the RoPE factor 2, 8,192"
    ]
    assert _notes("llama-4-scout-17b-16e-instruct", 4096) == [
        "--disable-sliding-window: the model has no sliding window (unchanged)"
    ]
    assert _notes("Qwen/Qwen2.5-7B", 4096) == [
        "--disable-sliding-window: use_sliding_window is false, no window to drop (unchanged)"
    ]
    kept = str(Path(__file__).parent / "fixtures/configs/deepseek-ai--DeepSeek-V4-Flash.json")
    assert _notes(kept, 128) == [
        "--disable-sliding-window: vLLM 0.33 refuses to start deepseek_v4 with it (its "
        "configuration class refuses sliding_window = None)"
    ]


def test_a_window_at_the_scaled_length_does_not_cap_it():
    # window 32,768 = the unscaled positions: vLLM keeps max_position_embeddings (32,768 × 2 =
    # 65,536.0) as the derived length and its key, so a longer request names that key
    config = dict(bundled_config("mistral-7b-v0.1"), sliding_window=32768,
                  rope_scaling={"rope_type": "linear", "factor": 2.0})  # fmt: skip
    refused = _plan(config_folder(config, "kvcalc-swa-off-"), 65537)
    assert "(max_position_embeddings=65536.0 or" in refused.verdict_reason


def test_a_refused_config_keeps_the_scaled_cap():
    # Gemma 4 with a linear factor 2 on its full layers (synthetic): vLLM's _get_and_verify_max_len
    # takes the 1,024-token window first and multiplies it by the factor, 2,048; a longer request
    # is refused on the length, naming sliding_window=2048.0, and a shorter one by the config class
    kept = Path(__file__).parent / "fixtures/configs/nvidia--Gemma-4-31B-IT-NVFP4.json"
    config = json.loads(kept.read_text())
    text = config.get("text_config", config)
    text["rope_parameters"]["full_attention"].update(rope_type="linear", factor=2.0)
    folder = config_folder(config, "kvcalc-swa-off-")
    assert "(sliding_window=2048.0 or" in _plan(folder, 4096).verdict_reason
    assert "Validation error for field 'sliding_window'" in _plan(folder, 2048).verdict_reason


def test_a_refused_config_with_two_windows_is_not_modelled():
    kept = Path(__file__).parent / "fixtures/configs/deepseek-ai--DeepSeek-V4-Flash.json"
    from kvcalc.hfconfig import parse_config

    shape = parse_config(json.loads(kept.read_text()), name="dsv4")
    layers = list(shape.layers)
    layers[0] = replace(layers[0], sliding_window=256)
    with pytest.raises(InputError) as err:
        without_sliding_window(replace(shape, layers=tuple(layers)))
    assert err.value.code == "unmodelled-option" and "(2 windows)" in err.value.message
    assert err.value.hint == "plan without it"
