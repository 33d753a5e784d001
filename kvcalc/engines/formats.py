"""Which KV-cache formats each engine runs, by the engine's own names, and what ``int4``/``int8`` mean.

A generic name resolves to the engine's own 4-/8-bit integer format where it has exactly one (or
one its own default picks), and is refused with the engine's formats listed where it has several
or none. Nothing here sizes anything: each engine module owns its formats' bytes.

>>> resolve_generic("vllm", "int8")
'int8_per_token_head'
>>> resolve_generic("llamacpp", "q4_0")
'q4_0'
"""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.frozen import frozen

#: the generic names and their bits
GENERIC_BITS = {"int8": 8, "int4": 4}


@frozen
class LowBit:
    """An engine's integer formats of one width: the one a generic name means, if there is one."""

    formats: tuple[str, ...]
    #: what the generic name resolves to (None: several, the user must choose)
    resolves_to: str | None
    #: how the engine spells it, for messages
    described: str


#: engine → generic name → its formats (the first engine-listed format is the default where given)
LOW_BIT: dict[str, dict[str, LowBit]] = {
    "vllm": {
        "int8": LowBit(formats=("int8_per_token_head",), resolves_to="int8_per_token_head",
                       described="int8_per_token_head"),
        "int4": LowBit(formats=("int4_per_token_head",), resolves_to="int4_per_token_head",
                       described="int4_per_token_head"),
    },
    "llamacpp": {
        "int8": LowBit(formats=("q8_0",), resolves_to="q8_0", described="q8_0"),
        "int4": LowBit(formats=("q4_0", "q4_1", "iq4_nl"), resolves_to=None, described="q4_0, q4_1, iq4_nl"),
    },
    "hf": {
        "int8": LowBit(formats=("hqq_int8",), resolves_to="hqq_int8",
                       described="quantized cache with nbits=8 (HQQ)"),
        "int4": LowBit(formats=("quanto_int4", "hqq_int4"), resolves_to="quanto_int4",
                       described="quantized cache with nbits=4 (quanto, transformers' default backend; or HQQ)"),
    },
    "lmdeploy": {
        "int8": LowBit(formats=("turbomind_int8",), resolves_to="turbomind_int8", described="quant_policy=8"),
        "int4": LowBit(formats=("turbomind_int4",), resolves_to="turbomind_int4", described="quant_policy=4"),
    },
    "trtllm": {
        "int8": LowBit(formats=("int8_per_tensor",), resolves_to="int8_per_tensor",
                       described="INT8 KV (TensorRT-engine backend)"),
    },
}  # fmt: skip

#: what each engine names a generic name differently, in the message for engines without it
_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp", "hf": "transformers",
          "trtllm": "TensorRT-LLM", "lmdeploy": "LMDeploy"}  # fmt: skip


def engine_label(engine: str) -> str:
    return _NAMES.get(engine, engine)


def resolve_generic(engine: str, name: str, accepted: tuple[str, ...] = ()) -> str:
    """``name`` as ``engine`` spells it: a generic ``int4``/``int8`` resolved, anything else as is.

    Raises ``ambiguous-dtype`` when the engine has several formats of that width and
    ``unsupported-dtype`` when it has none (naming what the engine and the others have).
    """
    key = str(name).strip().lower()
    if key not in GENERIC_BITS:
        return key
    entry = LOW_BIT.get(engine, {}).get(key)
    if entry is not None and entry.resolves_to is not None:
        return entry.resolves_to
    if entry is not None:
        raise InputError(
            f"{engine_label(engine)} has several {key} KV caches: {entry.described}",
            hint="choose one: --kv-cache-dtype " + " or ".join(entry.formats),
            code="ambiguous-dtype",
        )
    others = "; ".join(
        f"{engine_label(e)}: {t[key].described}" for e, t in LOW_BIT.items() if key in t
    )
    raise InputError(
        f"{engine_label(engine)} has no {key} KV cache",
        hint=(f"{engine_label(engine)} takes: {', '.join(accepted)}; " if accepted else "")
        + f"{key} elsewhere: {others}",
        code="unsupported-dtype",
    )


def require_engine(name: str) -> None:
    """Refuse a generic name where no engine is given, saying what each engine means by it."""
    key = str(name).strip().lower()
    if key in GENERIC_BITS:
        per_engine = "; ".join(
            f"{engine_label(e)}: {t[key].described}" for e, t in LOW_BIT.items() if key in t
        )
        raise InputError(
            f"{key} names each engine's own {GENERIC_BITS[key]}-bit KV cache ({per_engine})",
            hint="give the engine (--engine) or the format itself, e.g. --kv-cache-dtype "
            + LOW_BIT["vllm"][key].formats[0],
            code="ambiguous-dtype",
        )


def nearest(engine: str, name: str, accepted: tuple[str, ...]) -> str:
    """``"did you mean 'x'? "`` for a name ``engine`` does not take: the same width in this engine's
    own formats when ``name`` is another engine's (``q8_0`` → vLLM ``int8_per_token_head``), else the
    closest spelling; ``""`` when nothing is close."""
    import difflib

    key = str(name).strip().lower()
    for table in LOW_BIT.values():
        for generic, entry in table.items():
            mine = LOW_BIT.get(engine, {}).get(generic)
            if key in entry.formats and mine is not None:
                return f"did you mean {' or '.join(repr(f) for f in mine.formats)}? "
    close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""
