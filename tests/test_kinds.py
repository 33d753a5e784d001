"""One vocabulary for layer and group kinds across ``inspect``, ``plan`` and ``verify``.

Issue 12, bug 1: the workload concurrency looked for group kind ``"recurrent"`` while vLLM's groups
were called ``"mamba"``, so a hybrid model's recurrent groups were priced like sliding windows.
Nemotron-3-Nano on an H100 at ``--max-model-len 4096``, 100 + 28 tokens per request: 734 blocks;
each request needs 3 blocks in each of 4 recurrent groups and cdiv(128, 2,096) = 1 in the full one,
13 in all, so 734 / 13 = 56.46 requests (what ``kvcalc curve --lengths 128`` says), not the
734 / 9 = 81.56 the sliding rule gave.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from kvcalc.engines.base import KvCacheGroup
from kvcalc.engines.vllm.groups import LayerSpec, SpecKind
from kvcalc.model.attention_layouts import SharedKV
from kvcalc.model.dtypes import BF16
from kvcalc.model.layouts import LayerKind, RecurrentVariant
from kvcalc.planning.core import plan
from kvcalc.planning.curves import capacity_curve
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.verdict import workload
from tests.helpers import bundled_shape, fixture_shape

NEMOTRON = "nvidia-nemotron-3-nano-30b-a3b-bf16"


def test_hybrid_workload_concurrency_counts_the_recurrent_blocks():
    inputs = PlanInputs(gpu="H100-80GB", max_model_len=4096, prompt_len=100, output_len=28)
    result = plan(bundled_shape(NEMOTRON), inputs)
    assert result.workload_tokens == 128
    assert [(g.kind, g.blocks_per_request) for g in result.groups] == [("recurrent", 3)] * 4 + [
        ("full", 2)
    ]
    # 13 blocks per request, whatever the pool: the 734-block pool gives 56.46, not 81.56
    assert workload(inputs, replace(result, num_blocks=734), 4096)[1] == pytest.approx(
        56.4615, abs=1e-4
    )
    assert result.workload_concurrency == pytest.approx(result.num_blocks / 13)
    curve = capacity_curve(bundled_shape(NEMOTRON), PlanInputs(gpu="H100-80GB", max_model_len=4096),
                           lengths=(128,))  # fmt: skip
    assert curve.series[0].points[0].max_concurrency == pytest.approx(result.workload_concurrency)


def test_group_kinds_are_layer_kinds():
    groups = plan(
        bundled_shape("qwen3-next-80b-a3b-thinking"),
        PlanInputs(gpu="H100-80GB", max_model_len=32768),
    ).groups
    assert {g.kind for g in groups} == {LayerKind.RECURRENT, LayerKind.FULL}
    gemma = plan(
        bundled_shape("gemma-3-1b-it"), PlanInputs(gpu="H100-80GB", max_model_len=32768)
    ).groups
    assert {g.kind for g in gemma} == {LayerKind.SLIDING, LayerKind.FULL}
    with pytest.raises(ValueError):
        KvCacheGroup(kind="mamba", num_layers=1, page_bytes=1, block_size=1, blocks_per_request=1)


@pytest.mark.parametrize(
    ("kind", "tokens", "blocks"),
    [
        ("full", 100, 7),  # cdiv(100, 16)
        ("mla", 100, 7),
        ("sliding", 100, 8),  # cdiv(100, 16) + 1: the window need not start on a block boundary
        ("sliding", 4000, 10),  # capped at the window's blocks
        ("chunked", 100, 7),
        ("recurrent", 1, 3),  # constant per request
        ("full", 8192, 512),
    ],
)
def test_blocks_a_request_takes(kind, tokens, blocks):
    g = KvCacheGroup(kind=kind, num_layers=1, page_bytes=1, block_size=16,
                     blocks_per_request=3 if kind == "recurrent" else 10 if kind == "sliding" else 512)  # fmt: skip
    assert g.blocks_for(tokens, 8192) == blocks


def test_cross_blocks_follow_the_encoder():
    # a request holds cdiv(1,500, 16) = 94 cross-attention blocks whatever its length; without
    # the encoder's tokens known, the engine's bound
    g = KvCacheGroup(kind="cross", num_layers=1, page_bytes=1, block_size=16,
                     blocks_per_request=512, encoder_tokens=1500)  # fmt: skip
    assert g.blocks_for(1, 448) == g.blocks_for(448, 448) == 94
    bound = KvCacheGroup(kind="cross", num_layers=1, page_bytes=1, block_size=16,
                         blocks_per_request=512)  # fmt: skip
    assert bound.blocks_for(10, 448) == 512


def test_the_vocabulary():
    assert [k.value for k in LayerKind] == [
        "none",
        "full",
        "sliding",
        "chunked",
        "mla",
        "recurrent",
        # layer kinds only (inspect JSON has always shown them): KV sharing, DeepSeek-V4
        "shared",
        "compressed",
        # an encoder-decoder's cross-attention (Whisper): a layer and a vLLM group kind
        "cross",
    ]
    assert [v.value for v in RecurrentVariant] == [
        "mamba1",
        "mamba2",
        "gated_deltanet",
        "kda",
        "short_conv",
        "linear_attention",  # Bailing MoE V2.5's lightning attention (LinearAttentionState)
        "attention+mamba2",
    ]
    layers = bundled_shape(NEMOTRON).layers
    assert {x.kind for x in layers} == {LayerKind.RECURRENT, LayerKind.FULL, LayerKind.NONE}
    assert {getattr(x, "variant", None) for x in layers if x.kind is LayerKind.RECURRENT} == {
        RecurrentVariant.MAMBA2
    }


def test_shared_and_compressed_layers_have_their_own_kinds():
    # DeepSeek-V4-Flash: 43 layers, all compressed sparse attention (window 128, ratios 0/4/128)
    dsv4 = fixture_shape("deepseek-ai--DeepSeek-V4-Flash")
    assert {x.kind for x in dsv4.layers} == {LayerKind.COMPRESSED}
    assert dsv4.attention_kind == "compressed sparse MLA"
    # a KV-sharing layer (Gemma-3n, Gemma 4) owns no cache and is of kind shared
    shared = SharedKV(dtype=BF16, source_layer=3)
    assert shared.kind is LayerKind.SHARED and shared.kind == "shared" and not shared.has_cache


def _string_literals(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _string_literals(e)]
    return []


def _kind_strings_compared(tree: ast.AST) -> list[str]:
    """Comparisons and set operations of a ``.kind`` with a string literal, or of a ``kind`` /
    ``kinds`` name with a literal naming a layer kind (``"sliding" in kinds``)."""
    layer_kinds = {k.value for k in LayerKind}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.BinOp) and isinstance(
            node.op, (ast.BitAnd, ast.BitOr, ast.BitXor, ast.Sub)
        ):
            operands = [node.left, node.right]
        else:
            continue
        literals = {s for o in operands for s in _string_literals(o)}
        attributes = {o.attr for o in operands if isinstance(o, ast.Attribute)}
        names = attributes | {o.id for o in operands if isinstance(o, ast.Name)}
        if literals and (
            "kind" in attributes or (names & {"kind", "kinds"} and literals & layer_kinds)
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_layer_kind_compared_as_a_string():
    # kinds are LayerKind (and vLLM's SpecKind) members; deploy/ compares its YAML node kinds
    package = Path(__file__).resolve().parent.parent / "kvcalc"
    found = {
        path.relative_to(package).as_posix(): _kind_strings_compared(
            ast.parse(path.read_text(encoding="utf-8"))
        )
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "deploy"
    }
    assert {m: v for m, v in found.items() if v} == {}
    assert (
        len(_kind_strings_compared(ast.parse('x.kind in ("sliding", "chunked")\n"mla" in kinds')))
        == 2
    )
    assert not _kind_strings_compared(ast.parse('kind == "yarn"\nx.kind is LayerKind.FULL'))


def test_vllm_spec_kinds_name_layer_kinds():
    # a MambaSpec group holds recurrent layers; the attention specs are named as their layers
    assert {s.value: s.layer_kind for s in SpecKind} == {
        "full": LayerKind.FULL,
        "sliding": LayerKind.SLIDING,
        "chunked": LayerKind.CHUNKED,
        "mla": LayerKind.MLA,
        "mamba": LayerKind.RECURRENT,
        "cross": LayerKind.CROSS,
    }
    assert LayerSpec(kind="mamba", block_size=16, real_page_bytes=1).kind is SpecKind.MAMBA
