"""The fast path stays fast: no heavy module is imported by inspect/plan on a bundled model.

This checks imports, not time (timing is `bench/startup.py`'s job)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "torch",
    "huggingface_hub",
    "yaml",
    "transformers",
    "safetensors",
    "numpy",
    "gguf",
    "llama_cpp",
    "httpx",
    "requests",
)


def imported_modules(args: list[str]) -> list[str]:
    code = (
        "import sys, json\n"
        "from kvcalc.cli.app import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stderr.strip().splitlines()[-1])


def imported_heavy(args: list[str]) -> list[str]:
    return [m for m in imported_modules(args) if m.split(".")[0] in HEAVY]


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "llama-3.1-8b"],
        ["inspect", "deepseek-v3", "--json"],
        ["models"],
        ["plan", "llama-3.1-8b", "--gpu", "H100-80GB"],
    ],
)
def test_no_heavy_imports(args):
    assert imported_heavy(args) == []


def test_plan_imports_only_what_its_model_and_engine_need():
    # Llama-3.1-8B on vLLM: one family module (through the registry's index), one engine, and none
    # of the readers and layouts of other families (Gemma, DeepSeek-V3.2/V4, MiMo, Nemotron-NAS)
    loaded = imported_modules(["plan", "llama-3.1-8b", "--gpu", "H100-80GB"])
    families = [m for m in loaded if m.startswith("kvcalc.hfconfig.families.")]
    assert families == ["kvcalc.hfconfig.families._index", "kvcalc.hfconfig.families.llama"]
    engines = {m.split(".")[2] for m in loaded if m.startswith("kvcalc.engines.")}
    assert engines & {"sglang", "llamacpp", "hf", "trtllm", "lmdeploy"} == set()
    for module in (
        "kvcalc.engines.vllm.dsv4",
        "kvcalc.engines.vllm.sparse",
        "kvcalc.engines.vllm.v0",
        "kvcalc.model.attention_layouts",
        "kvcalc.planning.servecmd",
        "kvcalc.model.graph_dims",  # llama.cpp's graph widths
        "kvcalc.engines.catalogue",  # every engine, for the help pages only
        # what only some deployments use: speculation, LoRA, host tiers, recurrent layers, vLLM's
        # V0 and Qwen2.5-VL profile runs, DeepSeek-V4's and vision towers' weight tables
        "kvcalc.engines.speculative",
        "kvcalc.engines.vllm.speculative",
        "kvcalc.engines.vllm.lora",
        "kvcalc.engines.lora_options",
        "kvcalc.engines.vllm.offload",
        "kvcalc.engines.host_options",
        "kvcalc.model.recurrent_layouts",
        "kvcalc.estimate.v0_profile",
        "kvcalc.estimate.encoder_profile",
        "kvcalc.engines.vllm.mm_budget",
        "kvcalc.estimate.dsv4_tensors",
        "kvcalc.estimate.vision_tensors",
        # the weight records and readers of MLA, recurrent mixers and vision towers
        "kvcalc.hfconfig.weight_shape_extra",
        "kvcalc.hfconfig.weights_mixers",
        "kvcalc.hfconfig.weights_vision",
    ):
        assert module not in loaded, module


def test_plan_imports_no_other_command():
    # only plan's command module, and none of the library modules of the other commands:
    # deployment files, verification, curves, comparisons, inspect, their views, the Hub
    loaded = imported_modules(["plan", "llama-3.1-8b", "--gpu", "H100-80GB"])
    commands = [m for m in loaded if m.startswith("kvcalc.cli.cmd_")]
    assert commands == ["kvcalc.cli.cmd_plan"]
    views = [m for m in loaded if m.startswith("kvcalc.render.") and m.endswith("_view")]
    assert views == ["kvcalc.render.plan_view"]
    for package in ("kvcalc.deploy", "kvcalc.verify", "kvcalc.sources.gguf"):
        assert [m for m in loaded if m == package or m.startswith(package + ".")] == [], package
    for module in (
        "kvcalc.planning.curves",
        "kvcalc.planning.compare",
        "kvcalc.planning.inspect",
        "kvcalc.planning.suggest",
        "kvcalc.render.tables",
        "kvcalc.render.to_json",
        "kvcalc.sources.hub",
        "kvcalc.sources.catalog",
        "kvcalc.sources.calibration",
    ):
        assert module not in loaded, module


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "llama-3.1-8b", "--gpu", "H100-80GB"],
        [
            "plan",
            "llama-3.1-8b",
            "--gpu",
            "H100-80GB",
            "-tp",
            "2",
            "-E",
            "num_gpu_blocks_override=1000",
            "--max-model-len",
            "32K",
            "--json",
        ],
        ["inspect", "llama-3.1-8b"],
        ["models"],
    ],
)
def test_options_are_read_without_pydantic(args):
    # typer converts each option through a pydantic adapter; kvcalc's options convert their own
    # values (kvcalc.cli.coercion), so neither pydantic nor typer's adapters are imported
    loaded = imported_modules(args)
    assert [m for m in loaded if m.split(".")[0] in ("pydantic", "pydantic_core")] == []
    assert "typer._adapters" not in loaded
