"""The JSON every command prints, described once: from the result classes to JSON Schemas
(``kvcalc schema plan``, ``kvcalc schema check``) and to the reference page ``docs/json.md``.

Each key of a ``--json`` object is a field of a frozen result dataclass; its type comes from the
annotation and its meaning from the ``#:`` comment above it (the class docstring describes the
object). Where a ``to_dict`` reshapes a class (``inspect``'s layers, ``check``'s requirements), a
small view class below describes what is printed. ``tests/test_json_shapes.py`` validates real
outputs against the schemas (no key missing or extra) and fails when ``docs/json.md`` is stale
(``python scripts/json_reference.py`` rewrites it).
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any

from kvcalc.deploy.cheaper import CheaperCheck, CheaperOption
from kvcalc.deploy.judge import Failure
from kvcalc.engines.base import KvCacheGroup
from kvcalc.estimate.roofline import DecodePoint, PrefillEstimate
from kvcalc.frozen import frozen
from kvcalc.planning.architectures import (
    ArchitectureList,
    ArchitectureRow,
    CategoryCount,
    EngineSupport,
)
from kvcalc.planning.compare import CompareRow, Comparison
from kvcalc.planning.curves import CapacityCurve, CurvePoint, CurveSeries
from kvcalc.planning.inputs import JSON_NAMES, PlanInputs
from kvcalc.planning.inspect import DtypeRow, EngineFormatRow, InspectResult, LayerInfo
from kvcalc.planning.recommend_disagg import DisaggregatedRecommendation, PoolRatio
from kvcalc.planning.recommend_result import Candidate, Recommendation, Rejection
from kvcalc.planning.result import CapacityPlan, MemoryBreakdown, Suggestion
from kvcalc.planning.throughput import EngineCeiling, PlanThroughput, ThroughputReport
from kvcalc.sources.catalog import BundledRow
from kvcalc.verify.result import FillResult, VerifyResult

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# -- views: what a reshaping ``to_dict`` prints ----------------------------------------------------
@frozen
class StateShape:
    """One recurrent state tensor of a layer."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@frozen
class LayerEntry:
    """One layer's cache layout (``layers``, in order)."""

    #: the layer's index in the model (0-based)
    index: int
    #: ``full``, ``sliding``, ``chunked``, ``mla``, ``recurrent``, ``shared`` (reads another layer's
    #: cache), ``compressed`` (DeepSeek-V4) or ``none``
    kind: str
    num_kv_heads: int
    head_dim_k: int
    head_dim_v: int
    #: tokens a sliding or chunked layer keeps; null for full attention
    window: int | None
    #: per layer, as if it held every token
    bytes_per_token: int
    #: per layer, constant per request (recurrent layers)
    state_bytes: int
    state_shapes: tuple[StateShape, ...]
    #: the recurrent mixer (``mamba2``, ``gated_deltanet``...), null for other layers
    mixer: str | None


@frozen
class RequirementsEntry:
    """What the deployment file requires (null: not required)."""

    min_concurrency: float | None
    min_max_model_len: int | None
    #: ``min_headroom`` written as a size
    min_headroom_bytes: int | None
    #: ``min_headroom`` written as a percentage (0.1 = 10%)
    min_headroom_fraction: float | None
    #: ``max_host_memory``, in bytes
    max_host_memory_bytes: int | None
    #: the verdicts that pass
    allow_verdicts: tuple[str, ...]


@frozen
class CheckEntry(CapacityPlan):
    """One deployment: where it is written, whether it passed, then every key of its plan
    (``kvcalc plan --json``), the file's notes first in ``notes``."""

    #: the deployment's ``name`` (or the file's stem)
    name: str
    #: the file, as given on the command line
    file: str
    #: the line the deployment starts on
    line: int
    #: no requirement failed
    passed: bool
    #: each requirement the plan misses
    failures: tuple[Failure, ...]
    requirements: RequirementsEntry
    #: what ``recommend: true`` found (null: the file does not ask)
    recommend: CheaperCheck | None


@frozen
class FillEntry(FillResult):
    """``--fill``: the deployment emulated on this GPU."""

    #: activation + CUDA graphs + predicted non-torch
    predicted_overhead_bytes: int
    #: the overhead that explains the allocatable block count (what calibration records keep)
    measured_overhead_bytes: int


#: (class, field) → the type printed where the annotation says less (a dict, a reshaped tuple)
OVERRIDES: dict[tuple[type, str], Any] = {
    (CapacityPlan, "inputs"): PlanInputs,
    (CapacityPlan, "throughput"): PlanThroughput | None,
    (InspectResult, "layers"): tuple[LayerEntry, ...],
    (LayerInfo, "state_shapes"): tuple[StateShape, ...],
    (PlanInputs, "engine_options"): dict[str, Any],
    (VerifyResult, "fill"): FillEntry | None,
}
#: the documents: name → (how to get it, the root class, a list of them?)
DOCUMENTS: dict[str, tuple[str, type, bool]] = {
    "plan": ("kvcalc plan --json", CapacityPlan, False),
    "check": ("kvcalc check --format json", CheckEntry, True),
    "inspect": ("kvcalc inspect --json", InspectResult, False),
    "compare": ("kvcalc compare --json", Comparison, False),
    "curve": ("kvcalc curve --json", CapacityCurve, False),
    "throughput": ("kvcalc throughput --json", ThroughputReport, False),
    "models": ("kvcalc models --json", BundledRow, True),
    "verify": ("kvcalc verify --json", VerifyResult, False),
    "recommend": ("kvcalc recommend --json", Recommendation, False),
    "architectures": ("kvcalc models --architectures --json", ArchitectureList, False),
    "recommend-disaggregated": (
        "kvcalc recommend --disaggregated --json",
        DisaggregatedRecommendation,
        False,
    ),
}
#: the documents ``kvcalc schema NAME`` publishes (besides the deployment file)
SCHEMAS = ("plan", "check", "recommend", "recommend-disaggregated")
#: classes documented in the reference, so nested objects link to each other
_KNOWN = (MemoryBreakdown, Suggestion, KvCacheGroup, PlanInputs, PlanThroughput, Failure, DtypeRow,
          EngineFormatRow, LayerInfo, CompareRow, CurveSeries, CurvePoint, DecodePoint, PrefillEstimate, EngineCeiling,
          Candidate, Rejection, CheaperCheck, CheaperOption, Recommendation, PoolRatio,
          ArchitectureRow, CategoryCount, EngineSupport)  # fmt: skip


@dataclass(frozen=True)
class Key:
    name: str
    type: Any
    meaning: str


def _comments(cls: type) -> dict[str, str]:
    """``#:`` comments above each field, from the class's source (and its bases')."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        lines = source.splitlines()
        (node,) = ast.parse(source).body
        assert isinstance(node, ast.ClassDef)
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                text: list[str] = []
                i = item.lineno - 2
                while i >= 0 and lines[i].strip().startswith("#:"):
                    text.insert(0, lines[i].strip()[2:].strip())
                    i -= 1
                if text:
                    out[item.target.id] = " ".join(text)
    return out


def keys(cls: type) -> list[Key]:
    """The JSON keys of ``cls``'s objects, in order, with their types and meanings."""
    hints = typing.get_type_hints(cls)
    notes = _comments(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind = OVERRIDES.get((cls, f.name), hints[f.name])
        name = JSON_NAMES.get(f.name, f.name) if cls is PlanInputs else f.name
        out.append(Key(name, kind, notes.get(f.name, "")))
    if (
        cls is CheckEntry
    ):  # the deployment's keys first, as ``DeploymentResult.to_dict`` prints them
        head = ("name", "file", "line", "passed", "failures", "requirements")
        out = [k for n in head for k in out if k.name == n] + [k for k in out if k.name not in head]
    return out


def _args(kind: Any) -> tuple[Any, ...]:
    return typing.get_args(kind)


def _is_union(kind: Any) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType)


# -- JSON Schema ----------------------------------------------------------------------------------
def _fragment(kind: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if kind is Any:
        return {}
    if _is_union(kind):
        options = [_fragment(a, defs) for a in _args(kind) if a is not type(None)]
        nullable = type(None) in _args(kind)
        if len(options) == 1 and "type" in options[0] and nullable:
            out = dict(options[0])
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
            return out
        return {"anyOf": options + ([{"type": "null"}] if nullable else [])}
    origin = typing.get_origin(kind)
    if origin in (tuple, list):
        args = _args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _fragment(args[0], defs)}
        return {"type": "array", "prefixItems": [_fragment(a, defs) for a in args],
                "minItems": len(args), "maxItems": len(args)}  # fmt: skip
    if origin is dict or kind is dict:
        return {"type": "object"}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return {"type": "string", "enum": [str(m.value) for m in kind]}
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        if kind.__name__ not in defs:
            defs[kind.__name__] = {}  # placeholder against recursion
            defs[kind.__name__] = _object(kind, defs)
        return {"$ref": f"#/$defs/{kind.__name__}"}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if kind in simple:
        return {"type": simple[kind]}
    raise TypeError(f"no JSON type for {kind!r}")


def _object(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    ks = keys(cls)
    props = {}
    for k in ks:
        frag = _fragment(k.type, defs)
        props[k.name] = (
            {**frag, "description": k.meaning} if k.meaning and "$ref" not in frag else frag
        )
    doc = inspect.getdoc(cls) or ""
    return {"type": "object", "title": cls.__name__, "description": " ".join(doc.split()),
            "properties": props, "required": [k.name for k in ks], "additionalProperties": False}  # fmt: skip


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of document ``name`` (``plan``, ``check``...)."""
    command, root, many = DOCUMENTS[name]
    defs: dict[str, Any] = {}
    top = _object(root, defs)
    body = {"type": "array", "items": top} if many else top
    return {"$schema": SCHEMA_DIALECT, "$id": f"urn:kvcalc:{name}-json", **body, "title": command,
            "$defs": dict(sorted(defs.items()))}  # fmt: skip


# -- the reference page ---------------------------------------------------------------------------
def _type_text(kind: Any) -> str:
    if kind is Any:
        return "any"
    if _is_union(kind):
        return " or ".join(_type_text(a) for a in _args(kind))
    origin = typing.get_origin(kind)
    if origin in (tuple, list):
        args = _args(kind)
        inner = _type_text(args[0]) if len(args) == 2 and args[1] is Ellipsis else "mixed"
        return f"array of {inner}"
    if kind is type(None):
        return "null"
    if origin is dict or kind is dict:
        return "object"
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "string (" + ", ".join(f"`{m.value}`" for m in kind) + ")"
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return f"[{kind.__name__}](#{kind.__name__.lower()})"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(kind, str(kind))


def _nested(kind: Any) -> list[type]:
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return [kind]
    return [c for a in _args(kind) for c in _nested(a)]


def _md(text: str) -> str:
    return " ".join(text.split()).replace("``", "`").replace(":class:", "")


def _table(cls: type) -> list[str]:
    doc = _md(inspect.getdoc(cls) or "")
    lines = [f"### {cls.__name__}", "", doc, "", "| key | type | meaning |", "|---|---|---|"]
    lines[2:4] = [doc, ""] if doc else []
    for k in keys(cls):
        meaning = _md(k.meaning).replace("|", "\\|")
        lines.append(f"| `{k.name}` | {_type_text(k.type)} | {meaning} |")
    return lines + [""]


def markdown() -> str:
    """``docs/json.md``: every command's JSON, object by object."""
    out = [
        "# JSON output",
        "",
        "<!-- generated by `python scripts/json_reference.py` from the result classes "
        "(kvcalc/render/json_shapes.py); tests/test_json_shapes.py fails when it is stale -->",
        "",
        "Every `--json` key is a field of a result class; this page lists them all. The keys are a "
        "public contract: a rename is written in CHANGELOG.md. `kvcalc schema plan` and "
        "`kvcalc schema check` print JSON Schemas (draft 2020-12) of `plan --json` and "
        "`check --format json`.",
        "",
        "One vocabulary: sizes are bytes (`_bytes`) and per GPU unless the key says otherwise "
        "(`memory.total_bytes` is the device's); token counts are `_tokens` or vLLM's own names "
        "(`max_model_len`); `model` is the Hub id and `model_source` where its config came from; "
        "`gpu` is the catalog's name (`H100-SXM`); `kv_cache_dtype` is the format used (`auto` "
        "resolved; `inputs` keeps what was asked). KV per request comes in two accountings: "
        "`engine_kv_bytes_per_request` is what the engine reserves in its blocks (its concurrency "
        "divides by it); `layer_kv_bytes_per_request` is what the layers hold (windows capped, "
        "recurrent state added, no block rounding). `max_concurrency` is the engine's own figure; "
        "`runnable_concurrency` caps it by `max_num_seqs`.",
        "",
        "Layer and group kinds are one vocabulary across `inspect` (`layers[].kind`), `plan` "
        "(`groups[].kind`) and `verify` (component names such as `full K`, `recurrent conv`): "
        "`full`, `sliding`, `chunked`, `mla`, `recurrent` (Mamba2 and Gated DeltaNet state; "
        "vLLM's `MambaSpec` groups), `cross` (an encoder-decoder model's cross-attention over "
        "the encoder's output, Whisper: vLLM's `CrossAttentionSpec` groups, whose "
        "`encoder_tokens` say what a request writes) and `none`; two more are layer kinds only: "
        "`shared` (a layer "
        "reading another layer's cache, Gemma-3n and Gemma 4 KV sharing) and `compressed` "
        "(DeepSeek-V4's compressed sparse attention). A vLLM `UniformTypeKVCacheSpecs` group has "
        "`uniform_type: true`.",
        "",
    ]
    seen: list[type] = []
    for name, (command, root, many) in DOCUMENTS.items():
        shape = "a list of [" if many else "one ["
        out += [f"## `{command}`", "", f"Prints {shape}{root.__name__}](#{root.__name__.lower()})"
                f"{' objects' if many else ''}.", ""]  # fmt: skip
        queue = [root]
        while queue:
            cls = queue.pop(0)
            if cls in seen or (cls is CapacityPlan and name == "check"):
                continue
            seen.append(cls)
            out += _table(cls)
            queue += [c for k in keys(cls) for c in _nested(k.type)]
    return "\n".join(out).rstrip() + "\n"
