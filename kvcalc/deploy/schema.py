"""The deployment-file JSON Schema (draft 2020-12), built from the key table in
:mod:`kvcalc.deploy.keys` so that it cannot drift from the validator.

``kvcalc schema`` prints it; a copy is published as ``kvcalc/data/deployment.schema.json`` (a test
keeps the copy equal to :func:`build_schema`). Editors that speak the YAML language server can use
it with a first line ``# yaml-language-server: $schema=<path or URL of the copy>``.

The schema checks shapes and ranges; ``kvcalc check`` checks more (GPU and model names, a
``command:`` against explicit keys, ``num_gpus`` against the parallel sizes).
"""

from __future__ import annotations

from typing import Any

from kvcalc.deploy.keys import (
    COUNTS_PATTERN,
    DEFAULT_ALLOWED,
    DEPLOYMENT_KEYS,
    HUMAN_INT_PATTERN,
    PERCENT_PATTERN,
    SECTIONS,
    SIZE_PATTERN,
    Key,
)

SCHEMA_ID = "urn:kvcalc:deployment-file"


def _count(key: Key) -> dict[str, Any]:
    return {"type": "integer", "minimum": key.minimum if key.minimum is not None else 0}


def _size(key: Key) -> dict[str, Any]:
    bare = {"type": "number", "minimum": 0}
    if key.minimum:
        bare = {"type": "number", "exclusiveMinimum": 0}
    return {"oneOf": [bare, {"type": "string", "pattern": SIZE_PATTERN}]}


def _cache_dtypes() -> list[str]:
    from kvcalc.engines.dtype_names import known_names

    return list(known_names())


def _fragment(key: Key) -> dict[str, Any]:
    kind = key.kind
    if kind == "text":
        return {"type": "string", "minLength": 1}
    if kind == "gpu":
        return {"type": "string", "minLength": 1}
    if kind == "count":
        return _count(key)
    if kind == "number":
        return {"type": "number", "minimum": key.minimum if key.minimum is not None else 0}
    if kind == "tokens":
        return {"oneOf": [_count(key), {"type": "string", "pattern": HUMAN_INT_PATTERN}]}
    if kind == "fraction":
        return {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    if kind == "threshold":
        return {
            "oneOf": [
                {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                {"type": "string", "pattern": PERCENT_PATTERN},
            ]
        }
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "size":
        return _size(key)
    if kind == "headroom":
        return {"oneOf": [*_size(key)["oneOf"], {"type": "string", "pattern": PERCENT_PATTERN}]}
    if kind == "choice":
        return {"type": "string", "enum": list(key.choices)}
    if kind == "cache_dtype":
        return {"type": "string", "enum": _cache_dtypes()}
    if kind == "verdicts":
        item = {"type": "string", "enum": list(key.choices)}
        return {
            "oneOf": [item, {"type": "array", "items": item, "minItems": 1}],
            "default": list(DEFAULT_ALLOWED),
        }
    if kind == "counts":
        return {"oneOf": [{"type": "array", "items": _count(key), "minItems": 1},
                          {"type": "string", "pattern": COUNTS_PATTERN}]}  # fmt: skip
    if kind == "options":
        return {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
    if kind == "json":
        return {"oneOf": [{"type": "object"}, {"type": "string", "minLength": 2}]}
    if kind == "section":
        return {"$ref": f"#/$defs/{key.name}"}
    raise ValueError(f"no schema for kind {kind!r}")  # pragma: no cover - a table mistake


def _properties(keys: tuple[Key, ...]) -> dict[str, Any]:
    out = {}
    for key in keys:
        fragment = {**_fragment(key), "description": key.help}
        if key.examples:
            fragment["examples"] = list(key.examples)
        out[key.name] = fragment
    return out


def build_schema() -> dict[str, Any]:
    """The JSON Schema of a deployment file."""
    defs: dict[str, Any] = {
        "deployment": {
            "type": "object",
            "description": "One deployment: a model, the hardware, engine settings and requirements.",
            "properties": _properties(DEPLOYMENT_KEYS),
            "additionalProperties": False,
            "anyOf": [{"required": ["model"]}, {"required": ["command"]}],
        },
    }
    for name, keys in SECTIONS.items():
        defs[name] = {
            "type": "object",
            "properties": _properties(keys),
            "additionalProperties": False,
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kvcalc deployment file",
        "description": "One deployment, or several under `deployments:`, checked by `kvcalc check`.",
        "oneOf": [
            {"$ref": "#/$defs/deployment"},
            {
                "type": "object",
                "properties": {
                    "deployments": {
                        "type": "array",
                        "items": {"$ref": "#/$defs/deployment"},
                        "minItems": 1,
                    },
                },
                "required": ["deployments"],
                "additionalProperties": False,
            },
        ],
        "$defs": defs,
    }
