"""Multimodal architectures whose config class is the checkpoints' remote code, recorded through
``scripts/vllm_remote_configs.py`` (``registry_multimodal_mmremote.json``, weights per rank in
``multimodal_weights_mmremote.json``; ``tests/test_vllm_registry_multimodal.py`` asserts kvcalc
equals every scenario and every weight record): the towers counted by hand, the configs vLLM
cannot build refused, and the other engines refusing what vLLM alone was checked for."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from kvcalc.engines import get_engine
from kvcalc.engines.base import EngineRequest
from kvcalc.errors import KvcalcError
from kvcalc.estimate.vision_tensors import vision_tensors
from kvcalc.estimate.weights import _vision_rope_bytes
from kvcalc.hfconfig import parse_config

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_0_33" / "registry_multimodal_mmremote.json"
MODELS = json.loads(FIXTURE.read_text())["models"]
PHI3V = "microsoft--Phi-3-vision-128k-instruct.json"


def _config(name: str) -> dict:
    return copy.deepcopy(MODELS[name]["config"])


def test_phi3_v_tower_by_hand():
    # phi3v.py: CLIP ViT-L/14-336 (its own constants) up to layer_idx -2, 23 of 24 layers: each
    # 4 × (1,024² + 1,024) + 2 × 1,024 × 4,096 + 4,096 + 1,024 + 4 × 1,024 = 12,596,224; the class
    # embedding, the unbiased 3 × 14² convolution, 577 position rows and the pre-LayerNorm:
    # 290,909,184 (no post-LayerNorm). glb_GN and sub_GN 2 × 4,096 and img_projection 4,096 → 3,072
    # → 3,072 biased: 22,034,432; the class's own embed_tokens 32,064 × 3,072 = 98,500,608. Buffer:
    # 577 int64 position_ids. With the text model and its LongRoPE cache ((4,096 + 131,072) × 96)
    # that is vLLM's 8,491,004,936 B at TP 1 (recorded)
    hv, inter, h = 1024, 4096, 3072
    layer = 4 * (hv * hv + hv) + 2 * hv * inter + inter + hv + 4 * hv
    tower = 23 * layer + hv + 3 * 14 * 14 * hv + 577 * hv + 2 * hv
    projector = 2 * 4 * hv + h * 4 * hv + h + h * h + h
    assert (layer, tower, projector) == (12_596_224, 290_909_184, 22_034_432)
    model = parse_config(_config(PHI3V), name=PHI3V)
    assert sum(t.numel for t in vision_tensors(model.weights.vision)) == (
        tower + projector + 32064 * h
    )
    assert _vision_rope_bytes(model.weights, 2) == 577 * 8


@pytest.mark.parametrize("key", ["use_hd_transform", "with_learnable_separator"])
def test_phi3_v_without_the_hd_transform_is_refused(key):
    # phi3v.py Phi3HDImageEmbedding: assert self.use_hd_transform and self.with_learnable_separator
    config = _config(PHI3V)
    config["embd_layer"][key] = False
    with pytest.raises(KvcalcError) as refused:
        parse_config(config, name="phi3v")
    assert refused.value.code == "config-invalid" and key in refused.value.message


def test_phi3_v_feature_layer_sets_the_tower_depth():
    # layer_idx 10 builds layers 0-10 (11 of them); -1 would be the whole tower with its
    # post-LayerNorm, not recorded: its weights are left unknown (the cache is still planned)
    config = _config(PHI3V)
    config["img_processor"]["layer_idx"] = 10
    assert parse_config(config, name="phi3v").weights.vision.num_layers == 11
    config["img_processor"]["layer_idx"] = -1
    model = parse_config(config, name="phi3v")
    assert model.weights.vision is None and "layer_idx" in model.weights.problem
    assert model.layers


@pytest.mark.parametrize("engine", ["sglang", "llamacpp", "hf", "trtllm", "lmdeploy"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_other_engines_refuse_what_only_vllm_was_checked_for(engine, name):
    model = parse_config(_config(name), name=name)
    request = EngineRequest(model=model, max_model_len=4096, available_kv_bytes=20 << 30)
    with pytest.raises(KvcalcError) as refused:
        get_engine(engine).plan_kv_cache(request)
    assert refused.value.code == "unsupported-model"
