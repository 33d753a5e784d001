"""Cache storage formats: bytes per row, scales included."""

from __future__ import annotations

import pytest

from kvcalc.errors import InputError
from kvcalc.model import dtypes as D


@pytest.mark.parametrize(
    "name, values, expected",
    [
        ("fp32", 128, 512),
        ("fp16", 128, 256),
        ("bf16", 128, 256),
        ("fp8", 128, 128),
        ("fp8_e5m2", 128, 128),
        ("fp8_per_token_head", 128, 132),  # 128 B + one fp32 scale
        ("int8_per_token_head", 128, 132),  # vLLM int8_per_token_head: same as above
        ("int4_per_token_head", 128, 68),  # 64 B packed + fp32 scale (vLLM's Triton backend)
        ("nvfp4", 128, 72),  # 128/2 + 128/16
        ("q8_0", 128, 136),  # 4 blocks × 34
        ("q4_0", 128, 72),  # 4 × 18
        ("q4_1", 128, 80),  # 4 × 20
        ("q5_0", 128, 88),  # 4 × 22
        ("q5_1", 128, 96),  # 4 × 24
        ("iq4_nl", 128, 72),
    ],
)
def test_row_bytes(name, values, expected):
    assert D.parse_cache_dtype(name).row_bytes(values) == expected


@pytest.mark.parametrize(
    "alias, canonical",
    [("float16", "fp16"), ("bfloat16", "bf16"), ("fp8_e4m3", "fp8"),
     ("F16", "fp16"), ("Q8_0", "q8_0"), ("float32", "fp32")],
)  # fmt: skip
def test_aliases(alias, canonical):
    assert D.parse_cache_dtype(alias).name == canonical


def test_auto_means_model_dtype():
    assert D.parse_cache_dtype("auto") is None


def test_unknown_dtype_names_the_choices():
    with pytest.raises(InputError) as info:
        D.parse_cache_dtype("fp7")
    assert info.value.code == "unknown-dtype"
    assert "q8_0" in info.value.hint


def test_block_formats_need_whole_blocks():
    with pytest.raises(InputError) as info:
        D.Q8_0.row_bytes(80)  # 80 is not a multiple of 32
    assert info.value.code == "unsupported-dtype"


def test_generic_int_names_need_an_engine():
    """int4/int8 are each engine's own format; alone they are refused, naming the engines' formats."""
    with pytest.raises(InputError) as err:
        D.parse_cache_dtype("int8")
    assert err.value.code == "ambiguous-dtype"
    from kvcalc.engines.formats import resolve_generic

    assert resolve_generic("vllm", "int4") == "int4_per_token_head"
    assert resolve_generic("llamacpp", "int8") == "q8_0"
    assert resolve_generic("hf", "int4") == "quanto_int4"  # transformers' default backend
    assert resolve_generic("lmdeploy", "int8") == "turbomind_int8"
    assert resolve_generic("trtllm", "int8") == "int8_per_tensor"
    with pytest.raises(InputError) as err:
        resolve_generic("llamacpp", "int4")  # q4_0, q4_1, iq4_nl
    assert err.value.code == "ambiguous-dtype" and "iq4_nl" in err.value.hint
    with pytest.raises(InputError) as err:
        resolve_generic("sglang", "int4")
    assert err.value.code == "unsupported-dtype"


def test_a_name_from_another_engine_suggests_this_engines_own():
    from kvcalc.engines.formats import nearest

    assert nearest("vllm", "q8_0", ()) == "did you mean 'int8_per_token_head'? "
    assert (
        nearest("llamacpp", "int4_per_token_head", ())
        == "did you mean 'q4_0' or 'q4_1' or 'iq4_nl'? "
    )
    assert nearest("sglang", "fp8_e4m", ("fp8_e4m3", "fp8_e5m2")) == "did you mean 'fp8_e4m3'? "
    assert nearest("sglang", "q4_0", ("fp8_e4m3",)) == ""  # SGLang has no 4-bit integer cache
