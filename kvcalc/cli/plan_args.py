"""The settings a command was given → a model reference and :class:`PlanInputs`.

``given`` maps setting names (:mod:`kvcalc.planning.settings`) to values the options already
parsed. ``--from-command`` fills what the options left at the table's defaults; a setting given
both ways with different values is an error.
"""

from __future__ import annotations

from typing import Any

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.planning.inputs import PlanInputs
from kvcalc.planning.settings import BY_FIELD, plan_fields


@frozen
class PlanRequest:
    reference: str
    revision: str | None
    inputs: PlanInputs
    #: notes from --from-command (flags it ignored)
    notes: tuple[str, ...] = ()


def build_inputs(given: dict[str, Any], model: str | None) -> PlanRequest:
    values = plan_fields(given)
    reference = model
    revision: str | None = given.get("revision")
    notes: tuple[str, ...] = ()
    if given.get("from_command"):
        reference, command_revision, notes = _merge_command(given, reference, values)
        if command_revision and revision and command_revision != revision:
            raise InputError(f"--revision {revision} differs from the command's {command_revision}",
                             code="conflicting-options")  # fmt: skip
        revision = revision or command_revision
    if not reference:
        raise InputError(
            "no model given",
            hint="kvcalc plan MODEL --gpu NAME (see `kvcalc models`)",
            code="missing-model",
        )
    return PlanRequest(
        reference=reference, revision=revision, inputs=PlanInputs(**values), notes=notes
    )


def plan_inputs(given: dict[str, Any], model: str, **overrides: Any) -> PlanInputs:
    """:class:`PlanInputs` from the settings a command took (``compare``)."""
    return build_inputs({**given, **overrides}, model).inputs


def plan_request(given: dict[str, Any], model: str, **overrides: Any) -> PlanRequest:
    """The reference, revision and :class:`PlanInputs` (``curve``, ``throughput``: with
    ``--from-command``, whose model must be ``model`` if it names one)."""
    return build_inputs({**given, **overrides}, model)


def _merge_command(
    settings: dict[str, Any], reference: str | None, values: dict[str, Any]
) -> tuple[str | None, str | None, tuple[str, ...]]:
    """Flags from a ``vllm serve ...`` command fill what the options left at their defaults."""
    from kvcalc.planning.servecmd import parse_serve_command

    cmd = parse_serve_command(
        settings["from_command"],
        ignore_unmodelled=bool(settings.get("ignore_unmodelled")),
        engine_version=values.get("engine_version"),
    )
    if cmd.unmodelled:
        values["unmodelled_flags"] = cmd.unmodelled
    if reference and cmd.model and reference != cmd.model:
        raise InputError(
            f"the model {reference!r} differs from the command's {cmd.model!r}",
            hint="give the model once, either as the argument or in --from-command",
            code="conflicting-options",
        )
    for name, value in cmd.values.items():
        given = values.get(name)
        if name == "engine_options":  # -E keys and an SGLang command's engine options join
            value = _joined_options(tuple(given or ()), value)
            given = None
        if given is not None and given != BY_FIELD[name].default and given != value:
            raise InputError(
                f"{name} is {given!r} on the command line but {value!r} in --from-command",
                hint="give each setting once",
                code="conflicting-options",
            )
        values[name] = value
    return reference or cmd.model, cmd.revision, tuple(cmd.notes)


def _joined_options(given: tuple[tuple[str, Any], ...], command: tuple[tuple[str, Any], ...]):
    """``-E`` options and those of the command, one value a key."""
    joined = dict(given)
    for key, value in command:
        if key in joined and joined[key] != value:
            raise InputError(
                f"-E {key}={joined[key]} on the command line but {key} {value} in --from-command",
                hint="give each setting once",
                code="conflicting-options",
            )
        joined[key] = value
    return tuple(joined.items())


def say_notes(notes: tuple[str, ...]) -> None:
    """What ``--from-command`` did not use, said on stderr (the result has no notes of its own)."""
    from kvcalc.render import console

    for note in notes:
        console.err(f"note: --from-command: {note}")


#: what ``recommend`` searches unless a flag (or ``--from-command``) fixes it
SEARCHED = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
            "decode_context_parallel_size", "enable_expert_parallel")  # fmt: skip


def recommend_request(
    given: dict[str, Any], model: str | None, *, nodes: int, max_gpus: int | None, objective: str,
    top: int, disaggregated: bool,
) -> tuple[PlanRequest, Any]:  # fmt: skip
    """The fixed settings (a :class:`PlanRequest` whose inputs every candidate starts from) and
    the :class:`~kvcalc.planning.recommend_result.Search` of ``kvcalc recommend``."""
    from dataclasses import fields

    from kvcalc.engines.names import engine_name
    from kvcalc.model.gpus import get_gpu, list_gpus
    from kvcalc.planning.recommend_result import Search
    from kvcalc.planning.recommend_space import OBJECTIVES

    if objective not in OBJECTIVES:
        raise InputError(f"--objective {objective!r}: choose {', '.join(OBJECTIVES)}",
                         hint="cost ranks by price per hour", code="usage")  # fmt: skip
    gpus = tuple(get_gpu(g).name for g in given["gpu"] or ()) or tuple(g.name for g in list_gpus())
    fixed = dict(given)
    first = (given["engine"] or ("vllm",))[0]
    fixed.update(gpu=gpus[0], engine=first, kv_cache_dtype="auto", quantization=None)
    pinned = {name for name in SEARCHED if given.get(name) not in (None, False)}
    for name in SEARCHED:
        if fixed.get(name) is None:
            fixed.pop(name, None)
    request = build_inputs(fixed, model)
    inputs = request.inputs
    defaults = {f.name: f.default for f in fields(PlanInputs)}
    pinned |= {n for n in SEARCHED if getattr(inputs, n) != defaults[n]}
    engines = tuple(dict.fromkeys(engine_name(e) for e in given["engine"] or ()))
    if not engines:
        engines = (inputs.engine,)  # vllm, or the engine of --from-command
    dtypes = tuple(given["kv_cache_dtype"] or ())
    if not dtypes and inputs.kv_cache_dtype != "auto":
        dtypes = (inputs.kv_cache_dtype,)
    quants: tuple[str | None, ...] = tuple(given["quantization"] or ()) or (inputs.quantization,)
    search = Search(gpus=gpus, engines=engines, kv_cache_dtypes=dtypes, quantizations=quants,
                    nodes=nodes, max_gpus=max_gpus, pinned=frozenset(pinned),
                    objective=objective, top=top)  # fmt: skip
    return request, search
