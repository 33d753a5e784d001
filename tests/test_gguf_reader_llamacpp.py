"""The GGUF reader against llama.cpp itself: a loadable GGUF whose metadata is then rewritten the
way published files spell it (a key left out, a pattern given as a period), read by kvcalc and
loaded by llama.cpp (its Python binding, CPU), the cache llama.cpp prints equal to the one kvcalc
plans from its own reading of the same file.

``verify --run`` writes its GGUF from kvcalc's layout, so it checks the layout, not the reader;
here llama.cpp reads the rewritten file, and the expected lines are llama.cpp's own output for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.llamacpp.engine import (
    LlamaCppEngine,
    cache_types,
    context,
    ggml_name,
    is_iswa,
)
from kvcalc.engines.llamacpp.log import is_predicted_line
from kvcalc.sources.gguf.load import load_gguf_path
from kvcalc.verify.check import load_shape
from kvcalc.verify.llamacpp.gguf import spec_for, write_model
from kvcalc.verify.llamacpp.run import _run, import_binding

pytestmark = pytest.mark.llamacpp


def _rewrite(
    src: Path, dst: Path, *, drop: tuple[str, ...] = (), add: dict[str, Any] | None = None
) -> Path:
    """``src`` with the keys ``drop`` removed and ``add`` (uint32) set, as gguf-py's own
    ``gguf_new_metadata.py`` copies a file."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(src, "r")
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    new = {k: MetadataDetails(gguf.GGUFValueType.UINT32, v) for k, v in (add or {}).items()}
    copy_with_new_metadata(reader, writer, new, list(drop))
    return dst


def _base(tmp: Path, model: str, layers: int) -> Path:
    """A loadable GGUF of bundled ``model``'s first ``layers`` layers (verify's writer: every
    tensor its llama.cpp loader requires, the pattern written as one bool per layer)."""
    return write_model(spec_for(load_shape(model, layers=layers)), tmp / "base.gguf")


def _printed_and_planned(path: Path, n_ctx: int = 1024) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The KV lines llama.cpp prints loading ``path``, and the ones kvcalc plans from its reading."""
    shape = load_gguf_path(path).shape
    request = EngineRequest(model=shape, kv_cache_dtype="auto", max_model_len=n_ctx,
                            available_kv_bytes=1 << 40, extra={"n_ctx": n_ctx, "buffer_name": "CPU"})  # fmt: skip
    plan = LlamaCppEngine().plan_kv_cache(request)
    type_k, type_v = cache_types(request)
    ctx = context(request, "latest", shape, is_iswa(shape), type_v)
    measured = _run(import_binding(), path, request, ctx, ggml_name(type_k), ggml_name(type_v))
    planned = tuple(line for line in plan.log_lines if is_predicted_line(line))
    printed = tuple(line for line in measured.lines if is_predicted_line(line))
    return printed, planned


def _case(tmp: Path, model: str, layers: int, *, n_ctx: int = 1024, **rewrite: Any):
    path = _rewrite(_base(tmp, model, layers), tmp / "rewritten.gguf", **rewrite)
    printed, planned = _printed_and_planned(path, n_ctx)
    assert printed == planned
    return [line for line in printed if line.startswith("llama_kv_cache: size =")]


def test_gemma3_pattern_as_a_period(tmp_path):
    # gemma3.attention.sliding_window_pattern as a uint32 period of 3 (not one bool per layer):
    # llama.cpp slides layers i % 3 < 2, 4 of 6, and keeps 2 full
    sizes = _case(tmp_path, "gemma-3-1b-it", 6, drop=("gemma3.attention.sliding_window_pattern",),
                  add={"gemma3.attention.sliding_window_pattern": 3})  # fmt: skip
    assert [s.split("cells,")[1].split("layers")[0].strip() for s in sizes] == ["2", "4"]


def test_gemma3_without_a_pattern_takes_llama_cpps_period_of_six(tmp_path):
    # no sliding_window_pattern key: gemma3's own period 6, layer 5 alone full of 11 (a period of
    # 5 would make 4 and 9 full)
    sizes = _case(tmp_path, "gemma-3-1b-it", 11, drop=("gemma3.attention.sliding_window_pattern",))
    assert [s.split("cells,")[1].split("layers")[0].strip() for s in sizes] == ["1", "10"]


def test_gemma3_without_a_window_is_all_full_attention(tmp_path):
    drop = ("gemma3.attention.sliding_window", "gemma3.attention.sliding_window_pattern")
    sizes = _case(tmp_path, "gemma-3-1b-it", 6, drop=drop)
    # one cache: 1,024 cells · 6 layers · 1 KV head · 256 · 2 B · (K + V) = 6 MiB
    assert sizes == [
        "llama_kv_cache: size =    6.00 MiB (  1024 cells,   6 layers,  1/1 seqs), "
        "K (f16):    3.00 MiB, V (f16):    3.00 MiB"
    ]


def test_gemma2_without_a_window_takes_llama_cpps_4096(tmp_path):
    # gemma2's default window 4,096: the SWA cache PAD(min(8,192, 4,096 + 512), 256) = 4,608 cells
    # (a window within 256 below it pads to the same cells: the cache cannot tell them apart)
    path = _rewrite(_base(tmp_path, "gemma-2-9b-it", 4), tmp_path / "g2.gguf",
                    drop=("gemma2.attention.sliding_window",))  # fmt: skip
    printed, planned = _printed_and_planned(path, 8192)
    assert printed == planned
    assert "llama_kv_cache_iswa: creating     SWA KV cache, size = 4608 cells" in printed


def test_gemma2_without_a_pattern_takes_llama_cpps_period_of_two(tmp_path):
    sizes = _case(tmp_path, "gemma-2-9b-it", 4, drop=("gemma2.attention.sliding_window_pattern",))
    assert [s.split("cells,")[1].split("layers")[0].strip() for s in sizes] == ["2", "2"]


def test_no_head_count_kv_is_one_kv_head_per_query_head(tmp_path):
    # Llama-2-7B (MHA) without llama.attention.head_count_kv: llama.cpp takes head_count, 32 KV
    # heads: 1,024 cells · 2 layers · 32 · 128 · 2 B · 2 = 32 MiB (one KV head would be 1 MiB)
    sizes = _case(tmp_path, "llama-2-7b-hf", 2, drop=("llama.attention.head_count_kv",))
    assert sizes == [
        "llama_kv_cache: size =   32.00 MiB (  1024 cells,   2 layers,  1/1 seqs), "
        "K (f16):   16.00 MiB, V (f16):   16.00 MiB"
    ]


def test_gpt_oss_without_a_window_is_refused_by_both(tmp_path):
    from kvcalc.errors import ConfigError, KvcalcError

    path = _rewrite(_base(tmp_path, "gpt-oss-20b", 2), tmp_path / "o.gguf",
                    drop=("gpt-oss.attention.sliding_window",))  # fmt: skip
    with pytest.raises(ConfigError) as refused:
        load_gguf_path(path)
    assert refused.value.code == "config-missing-key"
    shape = load_gguf_path(_base(tmp_path, "gpt-oss-20b", 2)).shape  # the unrewritten file's
    request = EngineRequest(model=shape, kv_cache_dtype="auto", max_model_len=1024,
                            available_kv_bytes=1 << 40, extra={"n_ctx": 1024, "buffer_name": "CPU"})  # fmt: skip
    ctx = context(request, "latest", shape, is_iswa(shape), cache_types(request)[1])
    with pytest.raises(KvcalcError, match="could not load"):  # llama.cpp: the key is required
        _run(import_binding(), path, request, ctx, "f16", "f16")
