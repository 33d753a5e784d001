"""What the transformers engine resolves before sizing: the version it models (the one given, else
the installed transformers, read from package metadata without importing it), the cache dtype
(``auto``: the dtype transformers loads the model in), and a ``QuantizedCache``'s setup.
"""

from __future__ import annotations

from functools import lru_cache

from kvcalc.engines.base import EngineRequest
from kvcalc.engines.extra import extra_int, unknown_version, version_tuple
from kvcalc.engines.formats import nearest
from kvcalc.engines.hf.quantized import NAMED, QuantizedSetup, spec_from_options
from kvcalc.errors import InputError
from kvcalc.model.dtypes import BF16, FP16, FP32, CacheDtype
from kvcalc.model.shape import ModelShape

#: the modelled transformers profiles, newest first
VERSIONS = ("5", "4")
#: generic ``--kv-cache-dtype`` names → transformers' own format (its default backend is quanto;
#: quanto has no 8-bit and no 1-/3-bit cache, HQQ does)
GENERIC = {"int4": "quanto_int4", "int2": "quanto_int2", "int8": "hqq_int8", "int3": "hqq_int3",
           "int1": "hqq_int1"}  # fmt: skip
_DTYPES = {
    "fp32": FP32,
    "float32": FP32,
    "fp16": FP16,
    "float16": FP16,
    "bf16": BF16,
    "bfloat16": BF16,
}


@lru_cache(maxsize=1)
def installed_transformers_version() -> str | None:
    """The installed transformers version, read from package metadata (no import)."""
    from importlib import metadata

    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def major(version: str | None) -> tuple[str, str]:
    """(profile "5"/"4", a note saying where the version came from)."""
    source = "given"
    if version is None:
        version, source = installed_transformers_version(), "installed"
        if version is None:
            return VERSIONS[0], "transformers is not installed: version 5 behaviour assumed"
    parsed = version_tuple(version.split("+")[0].split("rc")[0].split(".dev")[0])
    if not parsed or parsed[0] < 4:
        raise unknown_version("hf", version, VERSIONS)
    profile = "5" if parsed[0] >= 5 else "4"
    return profile, f"transformers {version} ({source}) modelled as transformers {profile}"


#: every ``--kv-cache-dtype`` the hf engine takes
KV_CACHE_DTYPES = ("auto", "fp32", "fp16", "bf16", *NAMED)


def quantized_name(kv_cache_dtype: str, notes: list[str]) -> str | None:
    """The ``QuantizedCache`` format a ``--kv-cache-dtype`` names (``int4`` → ``quanto_int4``)."""
    name = kv_cache_dtype.strip().lower()
    if name in GENERIC:
        notes.append(f"{name}: transformers' QuantizedCache {GENERIC[name]} "
                     f"(backend {NAMED[GENERIC[name]][0]}, nbits {NAMED[GENERIC[name]][1]})")  # fmt: skip
        return GENERIC[name]
    return name if name in NAMED else None


def model_dtype(model: ModelShape, profile: str, notes: list[str]) -> CacheDtype:
    """The dtype transformers loads ``model`` in (and so computes and caches in) by default."""
    declared = (model.config_dtype or "").lower()
    if not declared:
        notes.append("no torch_dtype in the config: transformers builds the model in float32 (from_config; "
                     "from_pretrained takes the weights' dtype: pass --kv-cache-dtype bf16 if they are bf16)")  # fmt: skip
        return FP32
    if declared in ("float32", "fp32", "float"):
        return FP32  # transformers loads (and caches in) the config dtype
    if profile == "4":
        notes.append("transformers 4 loads float32 unless torch_dtype is passed; the config dtype "
                     "(torch_dtype='auto') is assumed")  # fmt: skip
    return model.dtype


def cache_dtype(request: EngineRequest, profile: str, notes: list[str]) -> CacheDtype:
    name = request.kv_cache_dtype.strip().lower()
    if name == "auto":
        return model_dtype(request.model, profile, notes)
    if name not in _DTYPES:
        raise InputError(
            f"transformers has no KV cache dtype {request.kv_cache_dtype!r}",
            hint=nearest("hf", name, KV_CACHE_DTYPES)
            + "choose one of: "
            + ", ".join(KV_CACHE_DTYPES)
            + " (int4/int8: QuantizedCache with nbits=4/8)",
            code="unsupported-dtype",
        )
    return _DTYPES[name]


def quantized_setup(
    request: EngineRequest, profile: str, named: str | None, notes: list[str]
) -> QuantizedSetup:
    """The ``QuantizedCache`` a request asks for (``-E cache_implementation=quantized`` or a name)."""
    cache = request.extra.get("cache_implementation", "quantized")
    if cache != "quantized":
        raise InputError(
            f"--kv-cache-dtype {request.kv_cache_dtype} is transformers' QuantizedCache, but "
            f"-E cache_implementation={cache} was given",
            hint="drop -E cache_implementation or set it to quantized",
            code="conflicting-options",
        )
    if profile == "4":
        raise InputError(
            "QuantizedCache is modelled from transformers 5.24's cache_utils.py; transformers 4's is not",
            hint="use --engine-version 5", code="unsupported-dtype",
        )  # fmt: skip
    name = request.kv_cache_dtype.strip().lower()
    if named is None and name != "auto" and name not in _DTYPES:
        cache_dtype(request, profile, notes)  # raises: not a transformers cache dtype
    dtype = _DTYPES.get(name) or model_dtype(request.model, profile, notes)
    spec, more = spec_from_options(request.extra, named)
    notes += more
    residual = extra_int(request.extra, "residual_tokens", None, minimum=0)
    batch = extra_int(request.extra, "batch_size", 1)
    assert batch is not None
    return QuantizedSetup(spec=spec, dtype=dtype, residual_tokens=residual, batch_size=batch)
