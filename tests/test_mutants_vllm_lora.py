"""``engines/vllm/lora.py``: the survivors of a mutation run (docs/testing.md, "Mutation testing")
killed with vLLM 0.33.0's own rules: ``LoRAConfig`` (``config/lora.py``) for the settings it
refuses, and the slot shapes its LoRA layer classes allocate (``lora/layers/replicated_linear.py``
for MoE routers, ``lora/layers/fused_moe.py`` ``FusedMoEWithLoRA`` for the experts, with
``fully_sharded_loras`` splitting A's rank of w13 and B's output of w2 over TP) as the module's
docstring reads them. MoE LoRA could not be run on the emulated platform: these are the
source's formulas, written out by hand.
"""

from __future__ import annotations

import pytest
from helpers import bundled_config

from kvcalc.engines.lora_options import LoraOptions
from kvcalc.engines.vllm.lora import check_lora_options, vllm_lora_slots
from kvcalc.errors import InputError
from kvcalc.hfconfig import parse_config
from kvcalc.planning.api import resolve_model_cached


def test_as_many_cpu_loras_as_loras_is_accepted():
    # LoRAConfig.__post_init__ raises only for max_cpu_loras < max_loras
    model = resolve_model_cached("llama-3.1-8b").shape
    slots = vllm_lora_slots(
        model, LoraOptions(max_loras=4, max_cpu_loras=4), tensor_parallel_size=1
    )
    assert slots.bytes_per_gpu > 0
    assert "LoRA: up to 4 adapter(s) in host memory (max_cpu_loras)" in slots.notes[1]


@pytest.mark.parametrize(
    ("options", "tp", "code", "message", "hint"),
    [
        (LoraOptions(target_modules=("q_proj",)), 1, "lora-not-modelled",
         "--lora-target-modules is modelled for SGLang only; vLLM's --lora-target-modules is not "
         "modelled", "plan vLLM without it (every supported module wrapped)"),
        (LoraOptions(max_lora_rank=24), 1, "lora-refused", "vLLM takes no --max-lora-rank 24",
         "choose one of 1, 8, 16, 32, 64, 128, 256, 320, 512 (MaxLoRARanks)"),
        (LoraOptions(max_loras=4, max_cpu_loras=3), 1, "lora-refused",
         "max_cpu_loras (3) must be >= max_loras (4), as vLLM's LoRAConfig says",
         "raise --max-cpu-loras or leave it out (default: --max-loras)"),
        (LoraOptions(max_lora_rank=8, fully_sharded_loras=True), 16, "lora-refused",
         "--fully-sharded-loras splits the rank 8 over 16 ranks: not divisible (vLLM's divide() "
         "fails)", "choose a rank divisible by --tensor-parallel-size"),
    ],
)  # fmt: skip
def test_each_refused_setting_says_why_and_what_to_do(options, tp, code, message, hint):
    with pytest.raises(InputError) as err:
        check_lora_options(options, tp)
    assert (err.value.code, err.value.message, err.value.hint) == (code, message, hint)


def test_a_config_without_architectures_is_refused_by_its_model_type():
    config = {k: v for k, v in bundled_config("llama-3.1-8b").items() if k != "architectures"}
    model = parse_config(config, name="no-architectures")
    with pytest.raises(InputError) as err:
        vllm_lora_slots(model, LoraOptions(), tensor_parallel_size=1)
    assert err.value.code == "lora-not-modelled"
    assert err.value.message == "LoRA slots are not modelled for llama"
    assert err.value.hint.endswith(
        "; plan without --enable-lora and add the slots to --weights-memory"
    )


def test_pipeline_parallel_lora_is_refused():
    model = resolve_model_cached("llama-3.1-8b").shape
    with pytest.raises(InputError) as err:
        vllm_lora_slots(model, LoraOptions(), tensor_parallel_size=1, pipeline_parallel_size=2)
    assert (err.value.code, err.value.message, err.value.hint) == (
        "lora-not-modelled",
        "LoRA slots with pipeline parallelism are not modelled",
        "plan with -pp 1, or without --enable-lora",
    )


def test_moe_router_slots_are_replicated():
    # Qwen3-30B-A3B's router (gate: hidden 2,048 → 128 experts) is a ReplicatedLinear:
    # A = r × 2,048, B = 128 × r; r = 16: 32,768 + 2,048 = 34,816 values a layer, × 48 layers
    # × 2 B × 4 slots = 13,369,344 B, the same on every TP rank
    model = resolve_model_cached("qwen3-30b-a3b").shape
    for tp in (1, 2):
        slots = vllm_lora_slots(model, LoraOptions(max_loras=4, max_lora_rank=16),
                                tensor_parallel_size=tp)  # fmt: skip
        assert dict(slots.by_class)["ReplicatedLinear"] == 34_816 * 48 * 2 * 4 == 13_369_344


def test_fully_sharded_moe_slots_split_the_rank_and_the_output():
    # TP 2, r = 16, fully sharded: the expert intermediate 768 / 2 = 384 per rank.
    # w13 (gated: 2 slices) 2 · ((16 / 2) · 2,048 + 384 · 16) = 45,056; w2 16 · 384 + (2,048 / 2)
    # · 16 = 22,528 → 67,584 values per expert × 128 experts × 48 layers × 2 B × 4 slots
    model = resolve_model_cached("qwen3-30b-a3b").shape
    options = LoraOptions(max_loras=4, max_lora_rank=16, fully_sharded_loras=True)
    slots = vllm_lora_slots(model, options, tensor_parallel_size=2)
    assert dict(slots.by_class)["FusedMoE"] == 67_584 * 128 * 48 * 2 * 4 == 3_321_888_768
    # not sharded, each rank holds every slot's whole rank and w2's whole output: 2 · (16 · 2,048
    # + 384 · 16) + (16 · 384 + 2,048 · 16) = 77,824 + 38,912 = 116,736 values per expert
    whole = vllm_lora_slots(model, LoraOptions(max_loras=4, max_lora_rank=16),
                            tensor_parallel_size=2)  # fmt: skip
    assert dict(whole.by_class)["FusedMoE"] == 116_736 * 128 * 48 * 2 * 4
