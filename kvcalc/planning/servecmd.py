"""Read a vLLM serving command (``vllm serve MODEL --max-model-len 32k -tp 2 ...``) as plan inputs.

Pure: no I/O. :func:`parse_serve_command` splits the text with :mod:`shlex` (POSIX rules;
``\\``-newline continuations and YAML-folded lines both work) and reads the flags that change
KV-cache sizing, spelled as vLLM spells them:

- ``--max-model-len`` (``32k`` = 32,000, ``32K`` = 32,768, ``1M`` = 1,048,576, as vLLM's
  ``human_readable_int``; ``auto`` or ``-1``, "fit to memory", leave it unset with a note),
- ``--tensor-parallel-size``/``-tp``, ``--pipeline-parallel-size``/``-pp``, ``--kv-cache-dtype``,
  ``--gpu-memory-utilization``, ``--max-num-seqs``, ``--max-num-batched-tokens`` (``8k`` too),
  ``--block-size``, ``--dtype``, ``--quantization``/``-q``, ``--enforce-eager`` (and
  ``--no-enforce-eager``), ``--kv-cache-memory-bytes`` (``20G`` too), ``--model``, ``--revision``,
  ``--cudagraph-capture-sizes 1 2 4``, ``--max-cudagraph-capture-size``, the CUDA-graph keys of
  ``-cc``/``--compilation-config`` and ``-O`` levels (:mod:`kvcalc.planning.servecmd_compile`);
- ``--flag=value`` as well as ``--flag value``, ``_`` for ``-`` in names (``--max_model_len``),
  a unique prefix of a flag (``--max-num-seq``), dotted keys of JSON flags
  (``--speculative-config.method``), as vLLM's ``FlexibleArgumentParser`` (an ``argparse``
  parser) accepts.

Every flag is looked up in vLLM 0.33.0's own parser, recorded
(:mod:`kvcalc.planning.servecmd_flags`): what vLLM refuses is refused as vLLM refuses it (a flag
it does not have, a value outside its choices such as ``--kv-cache-dtype bf16``, a stray
argument); a flag with no effect on memory is named in a note; a flag kvcalc does not model is
refused by name (``flag-not-modelled``, never its value: values may be tokens) unless
``ignore_unmodelled`` is set.

Programs understood: ``vllm serve MODEL``, ``python -m vllm.entrypoints.openai.api_server --model
MODEL``, ``docker run ... vllm/vllm-openai[:tag] ...``, or the flags alone. Leading ``VAR=value``
assignments, ``env``, ``exec`` and ``nohup`` are skipped. The same setting given twice with
different values is an error (``conflicting-flags``).

>>> cmd = parse_serve_command("vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k -tp 2")
>>> cmd.model, cmd.values
('meta-llama/Llama-3.1-8B', {'max_model_len': 32000, 'tensor_parallel_size': 2})
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvcalc.engines.flag_table import EngineFlag
from kvcalc.errors import InputError
from kvcalc.planning.servecmd_compile import (
    compilation_values,
    eplb_items,
    is_compilation_flag,
    is_level_flag,
    level_mode,
)
from kvcalc.planning.servecmd_flags import (
    FlagClass,
    check_value,
    classify,
    classify_config_key,
    is_recorded_release,
    judge,
    setting_for,
    sglang_dialect,
    table,
    vllm_dialect,
)
from kvcalc.planning.servecmd_program import (
    STOP,
    Start,
    flag_values,
    flags_start,
    is_flag,
    skip_unknown,
    split_command,
)
from kvcalc.planning.servecmd_sglang import read_sglang
from kvcalc.planning.settings import SETTINGS, Kind, Setting
from kvcalc.units import parse_token_count

__all__ = ["FLAGS", "ServeCommand", "parse_human_int", "parse_serve_command"]

CODE = "invalid-serve-command"


def parse_human_int(text: str, *, what: str = "value") -> int:
    """vLLM's ``human_readable_int`` (:func:`kvcalc.units.parse_token_count`), with this module's
    error code.

    >>> parse_human_int("32k"), parse_human_int("32K"), parse_human_int("1M")
    (32000, 32768, 1048576)
    """
    try:
        return parse_token_count(text, what=what)
    except InputError as exc:
        raise InputError(exc.message, hint=exc.hint, code=CODE) from None


def _converter(s: Setting) -> Callable[[str, str], Any]:
    """The setting's own parser, as vLLM reads the value, with this module's error code."""

    def convert(text: str, what: str) -> Any:
        try:
            return s.parse_serve(text)
        except InputError as exc:
            message = exc.message.replace(s.serve[0], what, 1)
            raise InputError(message, hint=exc.hint, code=CODE) from None

    return convert


def _flag_map() -> dict[str, tuple[Callable[[str, str], Any] | None, tuple[str, ...]]]:
    """Every setting of the table that ``vllm serve`` has, keyed by its PlanInputs field."""
    out: dict[str, tuple[Callable[[str, str], Any] | None, tuple[str, ...]]] = {}
    for s in SETTINGS:
        if s.serve:
            out[s.field or s.name] = (None if s.kind is Kind.BOOL else _converter(s), s.serve)
    return out


#: field → (converter or None for an on/off switch, spellings), from the settings table.
#: ``model`` and ``revision`` are not PlanInputs fields; every other key is.
FLAGS = _flag_map()


@dataclass(frozen=True)
class ServeCommand:
    """What a serving command says about KV-cache sizing.

    ``values`` is keyed by :class:`~kvcalc.planning.inputs.PlanInputs` field names
    (``kv_cache_memory_bytes`` in bytes), holding only the flags the command gave.
    ``flags`` says how each was spelled (``{"tensor_parallel_size": "-tp"}``), for messages.
    """

    model: str | None
    values: dict[str, Any]
    notes: tuple[str, ...] = ()
    revision: str | None = None
    flags: dict[str, str] = field(default_factory=dict)
    #: flags kvcalc does not model, left out (``ignore_unmodelled``); named, never their values
    unmodelled: tuple[str, ...] = ()

    def describe(self, name: str) -> str:
        """``--max-model-len 32000`` for a field the command set (for conflict messages)."""
        # the engine is set by an SGLang command, engine options by either engine's command
        if name in ("engine", "engine_options"):
            return f"{self.flags[name]}" if name == "engine_options" else f"`{self.flags[name]}`"
        flag = self.flags.get(name, FLAGS[name][1][0])
        value = self.values.get(name, self.model if name == "model" else None)
        return flag if isinstance(value, bool) else f"{flag} {value}"


def _normal(token: str) -> str:
    """FlexibleArgumentParser's spelling: ``_`` → ``-`` in a ``--`` name, up to its first dot
    (``--max_model_len=8k`` → ``--max-model-len=8k``; the value is left as it is)."""
    if not token.startswith("--"):
        return token
    name, eq, value = token.partition("=")
    head, dot, rest = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest + eq + value


class _Reader:
    def __init__(self, *, strict: bool = True) -> None:
        #: the recorded release: what vLLM 0.33 refuses is refused
        self.strict = strict
        self.values: dict[str, Any] = {}
        self.flags: dict[str, str] = {}
        self.model: str | None = None
        self.model_flag = ""
        self.unmodelled: list[str] = []
        self.no_effect: list[str] = []
        self.extra: list[str] = []
        #: engine options the command sets (``-E KEY``), by key
        self.options: dict[str, Any] = {}
        self.notes: list[str] = []
        self.level: tuple[str, str] | None = None

    def set(self, name: str, value: Any, spelled: str) -> None:
        if name == "model" and self.model is not None or name in self.values:
            old = self.model if name == "model" else self.values[name]
            old_flag = self.model_flag if name == "model" else self.flags[name]
            if old != value:
                raise InputError(
                    f"conflicting flags: {_shown(old_flag, old)} and {_shown(spelled, value)}",
                    hint="give each setting once",
                    code="conflicting-flags",
                )
            return
        if name == "model":
            self.model, self.model_flag = value, spelled
        else:
            self.values[name], self.flags[name] = value, spelled

    def flag(self, tokens: list[str], i: int) -> int:
        """Read the flag at ``tokens[i]``; return the index after it (and its values)."""
        raw, eq, attached = _normal(tokens[i]).partition("=")
        if is_compilation_flag(raw) or is_level_flag(raw):
            return self.compilation(tokens, i, raw, attached if eq else None)
        base, dot, key = raw.partition(".")
        flag = table().resolve(base)
        if flag is None and not self.strict:  # an older release's flag: not modelled
            self.unmodelled.append(base)
            return skip_unknown(tokens, i, bool(eq))
        if flag is None:
            raise InputError(
                f"{table().program}: unrecognized argument {base} ({table().engine} has no such "
                "flag and refuses to start)",
                hint="check its spelling in `vllm serve --help=all`",
                code=CODE,
            )
        if flag.name == "--eplb-config":  # its num_redundant_experts key is read
            return self.eplb(flag, tokens, i, raw, attached if eq else None)
        if dot:  # --speculative-config.method mtp: a key of a JSON flag
            after = i + 1 if eq else i + 2
            if not eq and (after > len(tokens) or tokens[i + 1] in STOP):
                raise InputError(f"{raw} needs a value", code=CODE)
            self.keep(flag, None, f"{flag.name}.{key}")
            return after
        values, after = flag_values(flag, tokens, i, raw, attached if eq else None)
        for value in values if self.strict else ():
            check_value(flag, value, raw)
        cls = classify(flag, values[0] if values else None)
        if cls is not FlagClass.MODELLED:
            self.keep(flag, values, flag.name)
            return after
        setting = setting_for(flag)
        if setting is None:  # an engine option: --num-gpu-blocks-override is -E its dest
            assert flag.dest in vllm_dialect().option_dests, flag.name
            self.option(flag, " ".join(values), raw)
            return after
        fld = setting.field or setting.name
        if not flag.takes_value:
            self.set(fld, base not in flag.negative, raw)
            return after
        value = " ".join(values)
        if flag.type == "_optional_type" and value in ("", "None"):  # vLLM's None: unset
            return after
        converted = _converter(setting)(value, raw)
        if converted is None and fld == "max_model_len":  # --max-model-len auto
            self.notes.append(
                f"{raw} {value}: vLLM fits the length to memory; kvcalc plans with "
                "the model's default and reports the longest length that fits"
            )
            return after
        self.set(fld, converted, raw)
        return after

    def option(self, flag: EngineFlag, text: str, spelled: str) -> None:
        """An engine option's value, an integer as vLLM's ``_optional_type(int)`` reads it
        (``None`` or nothing: unset)."""
        if text in ("", "None"):
            return
        try:
            value = int(text)
        except ValueError:
            raise InputError(
                f"{table().program}: argument {spelled}: expected an integer, got {text[:40]!r}",
                hint="vLLM's parser refuses it; give an integer",
                code=CODE,
            ) from None
        key = flag.dest
        if key in self.options and self.options[key] != value:
            raise InputError(
                f"conflicting flags: {spelled} {self.options[key]} and {spelled} {value}",
                hint="give each setting once",
                code="conflicting-flags",
            )
        self.options[key] = value

    def eplb(
        self, flag: EngineFlag, tokens: list[str], i: int, raw: str, attached: str | None
    ) -> int:
        """``--eplb-config '{"num_redundant_experts": 32}'`` or ``--eplb-config.num_redundant_experts
        32`` (vLLM's ``EPLBConfig``): the redundant experts are read; its other keys (window,
        step interval, policy, communicator...) are not modelled and named as such."""
        head, _, key = raw.partition(".")
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if following is not None and (is_flag(following) or following in STOP):
            following = None
        text = attached if attached is not None else following
        if text is None:
            raise InputError(f"{raw} needs a value", code=CODE)
        after = i + 1 if attached is not None else i + 2
        for k, value in eplb_items(head, key, text).items():
            if k != "num_redundant_experts":  # named as the command wrote it
                self.keep(flag, None, f"{flag.name}.{k}" if key else flag.name)
                continue
            convert = FLAGS["num_redundant_experts"][0]
            assert convert is not None
            self.set("num_redundant_experts", convert(str(value), f"{head}.{k}"), f"{head}.{k}")
        return after

    def keep(self, flag: EngineFlag, values: list[str] | None, name: str) -> None:
        """A flag kvcalc does not read: no effect on memory, or not modelled."""
        value = values[0] if values else None
        if classify(flag, value) is FlagClass.NO_EFFECT:
            self.no_effect.append(name)
        else:
            self.unmodelled.append(name)

    def compilation(self, tokens: list[str], i: int, raw: str, attached: str | None) -> int:
        """``-cc``/``--compilation-config`` (JSON or dotted) and ``-O`` levels."""
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if following is not None and (is_flag(following) or following in STOP):
            following = None
        if is_level_flag(raw):
            level_text = attached if attached is not None else None
            mode, used = level_mode(raw if level_text is None else "-O" + level_text, following)
            self.level = (mode, raw)
            return i + 1 if used is None else i + 2
        text = attached if attached is not None else following
        if text is None:
            raise InputError(f"{raw} needs a value", code=CODE)
        values, other_keys = compilation_values(raw, text)
        for fld, value in values.items():
            self.set(fld, value, raw)
        for spelled in other_keys:  # "-cc.mode"
            key = spelled.partition(".")[2]
            if classify_config_key("compilation_config", key) is FlagClass.NO_EFFECT:
                self.no_effect.append(spelled)
            else:
                self.unmodelled.append(spelled)
        return i + 1 if attached is not None else i + 2


def _shown(flag: str, value: Any) -> str:
    return flag if isinstance(value, bool) else f"{flag} {value}"


def _sglang(
    tokens: list[str], start: Start, *, ignore_unmodelled: bool, surface: str
) -> ServeCommand:
    """An SGLang command (:mod:`kvcalc.planning.servecmd_sglang`): the engine is SGLang."""
    read = read_sglang(tokens, start.index, positional_model=start.positional_model)
    program = sglang_dialect().table.program
    unmodelled = judge(read, program, ignore_unmodelled, surface, sglang_dialect())
    values = dict(read.values)
    revision = values.pop("revision", None)
    read.flags.pop("revision", None)
    values["engine"] = str(start.engine)
    flags = {**read.flags, "engine": program}
    if read.options:
        values["engine_options"] = tuple(sorted(read.options.items()))
        flags["engine_options"] = ", ".join(f"-E {k}={v}" for k, v in sorted(read.options.items()))
    return ServeCommand(model=read.model, values=values, notes=tuple(read.notes), revision=revision,
                        flags=flags, unmodelled=unmodelled)  # fmt: skip


def parse_serve_command(
    text: str,
    *,
    ignore_unmodelled: bool = False,
    engine_version: str | None = None,
    surface: str = "cli",
) -> ServeCommand:
    """Read a vLLM serving command; raise :class:`~kvcalc.errors.InputError` if it is not one,
    if vLLM would refuse it, or (``flag-not-modelled``) if it sets a flag kvcalc does not model
    and ``ignore_unmodelled`` is not set. ``engine_version`` older than 0.33: flags and values
    are not checked against 0.33's parser, and a flag it lacks is not modelled. ``surface``
    (``"cli"``, ``"yaml"``) words the hint.

    >>> parse_serve_command("python -m vllm.entrypoints.openai.api_server --model=qwen3-8b "
    ...                     "--kv-cache-dtype fp8 --enforce-eager").values
    {'kv_cache_dtype': 'fp8', 'enforce_eager': True}
    """
    tokens = split_command(text)
    start = flags_start(tokens)
    if start.sglang:
        return _sglang(tokens, start, ignore_unmodelled=ignore_unmodelled, surface=surface)
    i, positional_model = start.index, start.positional_model
    reader = _Reader(strict=is_recorded_release(engine_version))
    while i < len(tokens):
        token = tokens[i]
        if token in STOP:
            reader.notes.append(f"read the command up to {token!r}; the rest is ignored")
            break
        if is_flag(token):
            i = reader.flag(tokens, i)
            continue
        if positional_model and not reader.extra:
            reader.set("model", token, "the model argument")
            positional_model = False
        else:
            reader.extra.append(token)
        i += 1
    if reader.level is not None and "cudagraph_mode" not in reader.values:
        mode, spelled = reader.level
        reader.set("cudagraph_mode", mode, spelled)
        reader.notes.append(f"{spelled}: cudagraph_mode {mode}, that level's default")
    unmodelled = judge(reader, table().program, ignore_unmodelled, surface, vllm_dialect())
    revision = reader.values.pop("revision", None)
    reader.flags.pop("revision", None)
    if reader.options:
        opts = sorted(reader.options.items())
        reader.values["engine_options"] = tuple(opts)
        reader.flags["engine_options"] = ", ".join(f"-E {k}={v}" for k, v in opts)
    return ServeCommand(
        model=reader.model,
        values=reader.values,
        notes=tuple(reader.notes),
        revision=revision,
        flags=reader.flags,
        unmodelled=unmodelled,
    )
