"""Deployment files → validated :class:`Deployment` values, or every problem with its line.

A file holds one deployment (a mapping of the keys in :mod:`kvcalc.deploy.keys`) or a list of them
under ``deployments:``. :func:`parse_document` checks everything it can without loading a model —
unknown keys (with a "did you mean"), types, ranges, GPU names, cache dtypes, a serving
``command:`` and its agreement with explicit keys — and returns all problems at once, each a
:class:`Problem` printed as ``file:line:column: message``. Pure: the YAML is read by
:func:`kvcalc.deploy.yamlread.read_yaml`, the file by :mod:`kvcalc.deploy.run`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from kvcalc.deploy.deployment import Deployment, Problem, Requirements, own_hint
from kvcalc.deploy.keys import BY_NAME, DEPLOYMENT_KEYS, SECTIONS
from kvcalc.deploy.values import BadValue, Key, convert, describe, suggest
from kvcalc.deploy.yamlread import Node
from kvcalc.errors import InputError
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.settings import parse_weight_dtype

__all__ = ["FIELD_KEYS", "Deployment", "Problem", "Requirements", "own_hint", "parse_document"]

#: a PlanInputs field → the file key that sets it
FIELD_KEYS: dict[str, str] = {
    **{key.field: key.name for key in DEPLOYMENT_KEYS if key.field},
    **{
        key.field: f"{sec}.{key.name}"
        for sec, keys in SECTIONS.items()
        for key in keys
        if key.field
    },
}


class _Ctx:
    """Problems of one file, and where it lives (model paths are relative to it)."""

    def __init__(self, file: str, base_dir: str) -> None:
        self.file = file
        self.base_dir = base_dir
        self.problems: list[Problem] = []
        #: values the YAML reader already reported (an unsafe tag, a bad alias)
        self.bad = 0

    def at(self, node: Node, message: str) -> None:
        self.problems.append(Problem(self.file, node.line, node.column, message))


def parse_document(
    root: Node | None, *, file: str, base_dir: str = "."
) -> tuple[list[Deployment], list[Problem]]:
    """The deployments in one file's YAML tree, and every problem found in it."""
    ctx = _Ctx(file, base_dir)
    deployments: list[Deployment] = []
    if root is None:
        ctx.problems.append(
            Problem(
                file,
                1,
                1,
                "the file is empty: expected a deployment "
                "(model:, gpu:, ...) or a `deployments:` list",
            )
        )
        return deployments, ctx.problems
    if root.kind != "map":
        if root.kind != "bad":
            ctx.at(
                root,
                f"expected a deployment (a mapping with model:, gpu:, ...) or a "
                f"`deployments:` list, got {_kind(root)}",
            )
        return deployments, ctx.problems
    stem = PurePath(file).stem
    entries: list[tuple[int, Node]] = []
    if "deployments" in root.value:
        entries = _entries(root, ctx)
        for index, node in entries:
            dep = _deployment(node, ctx, default_name=f"{stem}#{index + 1}")
            if dep is not None:
                deployments.append(dep)
    else:
        dep = _deployment(root, ctx, default_name=stem, top_level=True)
        if dep is not None:
            deployments.append(dep)
    if "deployments" in root.value:
        _duplicate_names([node for _, node in entries], ctx)
    return deployments, sorted(ctx.problems, key=lambda p: (p.line or 0, p.column or 0))


def _duplicate_names(entries: list[Node], ctx: _Ctx) -> None:
    seen: dict[str, Node] = {}
    for entry in entries:
        name = entry.value.get("name", (None, None))[1]
        if name is None or name.kind != "scalar" or not isinstance(name.value, str):
            continue
        if name.value in seen:
            ctx.at(
                name,
                f"duplicate deployment name {name.value!r} (first at line {seen[name.value].line})",
            )
        seen.setdefault(name.value, name)


def _kind(node: Node) -> str:
    return {"map": "a mapping", "seq": "a list"}.get(node.kind, describe(node.value))


def _entries(root: Node, ctx: _Ctx) -> list[tuple[int, Node]]:
    for name, (key_node, _) in root.value.items():
        if name != "deployments":
            ctx.at(
                key_node,
                f"unknown key {name!r} beside `deployments:` (each deployment's keys "
                "go inside its list entry)",
            )
    node = root.value["deployments"][1]
    if node.kind != "seq":
        if node.kind != "bad":
            ctx.at(node, f"deployments: expected a list of deployments, got {_kind(node)}")
        return []
    if not node.value:
        ctx.at(node, "deployments: the list is empty")
    out = []
    for index, entry in enumerate(node.value):
        if entry.kind == "map":
            out.append((index, entry))
        elif entry.kind != "bad":
            ctx.at(
                entry,
                f"deployments[{index}]: expected a deployment (a mapping), got {_kind(entry)}",
            )
    return out


def _read_keys(
    node: Node,
    keys: tuple[Key, ...],
    ctx: _Ctx,
    prefix: str,
    where: dict[str, Node],
    extra_names: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Convert each key of a mapping; report unknown keys and bad values."""
    table = {key.name: key for key in keys}
    values: dict[str, Any] = {}
    for name, (key_node, value_node) in node.value.items():
        key = table.get(name)
        if key is None:
            inside = f" in {prefix.rstrip('.')}" if prefix else ""
            home = [s for s, keys_of in SECTIONS.items() if name in {k.name for k in keys_of}]
            where_it_goes = (
                f"; it belongs to a section: move it under `{home[0]}:`"
                if home and not prefix
                else suggest(name, [*table, *extra_names])
            )
            ctx.at(key_node, f"unknown key {name!r}{inside}" + where_it_goes)
            continue
        where[prefix + name] = value_node
        if value_node.kind == "bad":  # already reported by the YAML reader
            ctx.bad += 1
            continue
        if key.kind == "section":
            if value_node.kind != "map":
                ctx.at(
                    value_node,
                    f"{name}: expected a mapping of "
                    f"{', '.join(k.name for k in SECTIONS[name])}, got {_kind(value_node)}",
                )
                continue
            values[name] = _read_keys(value_node, SECTIONS[name], ctx, f"{name}.", where)
            continue
        try:
            values[name] = convert(key, value_node.plain())
        except BadValue as exc:
            ctx.at(value_node, f"{prefix}{name}: {exc}")
    return values


def _target_from_requirements(fields_: dict[str, Any], requirements: dict[str, Any]) -> None:
    """``min_concurrency`` is the plan's target where the file gives no ``batch``: per engine, its
    share of the data-parallel replicas, rounded up (``max_num_seqs`` only caps what runs)."""
    wanted = requirements.get("min_concurrency")
    if fields_.get("batch") is not None or not isinstance(wanted, int | float) or wanted <= 0:
        return
    world = int(fields_.get("tensor_parallel_size") or 1) * int(
        fields_.get("pipeline_parallel_size") or 1
    )
    replicas = max(1, int(fields_.get("num_gpus") or world) // max(1, world))
    fields_["batch"] = max(1, math.ceil(wanted / replicas))


def _deployment(
    node: Node, ctx: _Ctx, *, default_name: str, top_level: bool = False
) -> Deployment | None:
    before = len(ctx.problems), ctx.bad
    where: dict[str, Node] = {}
    extra = ("deployments",) if top_level else ()
    values = _read_keys(node, DEPLOYMENT_KEYS, ctx, "", where, extra)
    notes: list[str] = []
    model, revision = values.get("model"), values.get("revision")
    fields_: dict[str, Any] = {}
    for name, value in values.items():
        key = BY_NAME[name]
        if key.field:
            fields_[key.field] = value
    command_ok = "command" not in node.value
    if "command" in values:
        model, revision, command_ok = _merge_command(
            values, node, fields_, ctx, notes, model, revision
        )
    if model is None and "model" not in node.value and command_ok:
        if "command" in node.value:
            ctx.at(where["command"], "command: it names no model; add `model:`")
        else:
            ctx.at(
                node, "no model: add `model:` (a bundled name, a path or a Hub id) or a `command:`"
            )
    _check_required(node, ctx, fields_)
    if (len(ctx.problems), ctx.bad) != before:
        return None
    fields_.update(values.get("workload", {}))
    _target_from_requirements(fields_, values.get("requirements", {}))
    if fields_.get("dtype") is not None:
        fields_["dtype"] = parse_weight_dtype(fields_["dtype"])
    try:
        inputs = PlanInputs(**fields_)
    except InputError as exc:
        mentioned = _mentioned_key(exc.message, where)
        ctx.at(where.get(mentioned, node) if mentioned is not None else node, exc.message)
        return None
    if model is None:  # reported above; never size a deployment without its model
        ctx.at(node, "no model: add `model:` (a bundled name, a path or a Hub id) or a `command:`")
        return None
    return Deployment(
        name=str(values.get("name", default_name)),
        file=ctx.file,
        line=node.line,
        column=node.column,
        model=_model_path(model, ctx.base_dir),
        revision=revision,
        inputs=inputs,
        requirements=Requirements(**values.get("requirements", {})),
        has_workload="prompt_len" in values.get("workload", {}),
        recommend=bool(values.get("recommend", False)),
        notes=tuple(notes),
        positions={k: (n.line, n.column) for k, n in where.items()},
    )


def _check_required(node: Node, ctx: _Ctx, fields_: dict[str, Any]) -> None:
    given = ("gpu", "gpu_memory_bytes", "kv_cache_memory_bytes")
    if not any(fields_.get(f) is not None for f in given) and not _written(
        node, ("gpu", "gpu_memory", "kv_cache_memory")
    ):
        ctx.at(node, "no GPU: add `gpu:` (see `kvcalc gpus`), `gpu_memory:` or `kv_cache_memory:`")
    world = fields_.get("tensor_parallel_size", 1) * fields_.get("pipeline_parallel_size", 1)
    if isinstance(fields_.get("num_gpus"), int) and fields_["num_gpus"] < world:
        num_node = node.value["num_gpus"][1]
        ctx.at(
            num_node,
            f"num_gpus: {fields_['num_gpus']} is fewer than tensor_parallel_size × "
            f"pipeline_parallel_size = {world}",
        )


def _written(node: Node, names: tuple[str, ...]) -> bool:
    return any(name in node.value for name in names)


def _merge_command(values, node, fields_, ctx, notes, model, revision):
    from kvcalc.planning.servecmd import parse_serve_command

    command_node = node.value["command"][1]
    try:
        cmd = parse_serve_command(
            values["command"],
            ignore_unmodelled=bool(values.get("ignore_unmodelled")),
            engine_version=fields_.get("engine_version"),
            surface="yaml",
        )
    except InputError as exc:
        ctx.at(command_node, f"command: {exc.message}{own_hint(exc)}")
        return model, revision, False
    notes.extend(f"command: {note}" for note in cmd.notes)
    if cmd.unmodelled:
        fields_["unmodelled_flags"] = cmd.unmodelled
    if cmd.model is not None:
        if model is not None and model != cmd.model:
            ctx.at(
                node.value["model"][1],
                f"model: {model!r} disagrees with the command's model "
                f"{cmd.model!r} (line {command_node.line})",
            )
        model = model or cmd.model
    if cmd.revision is not None:
        if revision is not None and revision != cmd.revision:
            ctx.at(
                node.value["revision"][1],
                f"revision: {revision!r} disagrees with the "
                f"command's --revision {cmd.revision!r} (line {command_node.line})",
            )
        revision = revision or cmd.revision
    for name, value in cmd.values.items():
        if name not in fields_:
            fields_[name] = value
            continue
        if _same(name, fields_[name], value):
            continue
        key = FIELD_KEYS[name]
        ctx.at(
            node.value[key][1],
            f"{key}: {describe(values[key])} disagrees with "
            f"{cmd.describe(name)} in `command` (line {command_node.line})",
        )
    return model, revision, True


def _same(name: str, a: Any, b: Any) -> bool:
    if name == "kv_cache_dtype":
        from kvcalc.model.dtypes import parse_cache_dtype

        try:
            return parse_cache_dtype(a) == parse_cache_dtype(b)
        except InputError:  # an engine's own name (quanto_int4, turbomind_int8) or a generic one
            return str(a).strip().lower() == str(b).strip().lower()
    if name == "dtype":
        return parse_weight_dtype(a or "auto") == parse_weight_dtype(b or "auto")
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return a == b


def _mentioned_key(message: str, written: Mapping[str, Any]) -> str | None:
    """The written key a message names first (``gpu_memory_utilization must be ...``), if any."""
    found = [(message.find(name.split(".")[-1]), name) for name in written]
    found += [(message.find(f), k) for f, k in FIELD_KEYS.items() if k in written]
    found = [f for f in found if f[0] >= 0]
    return min(found)[1] if found else None


def _model_path(model: str, base_dir: str) -> str:
    """A relative path is relative to the deployment file's folder; other references unchanged."""
    from kvcalc.sources.resolve import looks_like_path

    if (
        looks_like_path(model)
        and not os.path.isabs(os.path.expanduser(model))
        and not model.startswith("~")
    ):
        return os.path.normpath(os.path.join(base_dir, model))
    return model
