"""Every ``vllm serve`` flag in one of three classes, and its value read as vLLM reads it.

The flags are vLLM 0.33.0's own, recorded from its parser (:mod:`kvcalc.engines.flag_table`):

- **modelled**: one of its spellings is a ``serve=`` spelling of the settings table
  (:mod:`kvcalc.planning.settings`), or it is a compilation flag (``-cc``, ``-O``:
  :mod:`kvcalc.planning.servecmd_compile`). Derived, never listed: a setting that gains a
  ``serve=`` spelling makes the flag modelled;
- **no effect on memory**: listed in :mod:`kvcalc.engines.vllm.serve_flags` (reviewed against
  vLLM's code), some for certain values only (``--load-format safetensors``);
- **not modelled**: every other flag. A command that has one is refused (``flag-not-modelled``)
  unless ``ignore_unmodelled`` is set, and then the plan says it is not fully modelled.

Values are checked as vLLM checks them: argparse's ``choices`` (``--dtype bf16`` is refused with
vLLM's list), and the lists its config classes validate (``--kv-cache-dtype``, ``--quantization``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

from kvcalc.engines.flag_table import EngineFlag, FlagTable
from kvcalc.engines.vllm import serve_flags as vllm_flags
from kvcalc.engines.vllm.serve_flags import NO_EFFECT_CONFIG_KEYS
from kvcalc.errors import InputError
from kvcalc.planning.servecmd_compile import FLAGS as COMPILATION_FLAGS
from kvcalc.planning.servecmd_compile import KEYS as COMPILATION_KEYS
from kvcalc.planning.settings import SETTINGS, Setting

__all__ = [
    "ATTENTION_DP_FLAGS",
    "Dialect",
    "FlagClass",
    "check_value",
    "classify",
    "classify_config_key",
    "is_recorded_release",
    "judge",
    "modelled_options",
    "not_modelled_error",
    "setting_for",
    "sglang_dialect",
    "table",
    "vllm_dialect",
]

CODE = "invalid-serve-command"
#: SGLang 0.5.23's attention data parallelism (``--attn-dp-size N``: what the deprecated
#: ``--dp-size N --enable-dp-attention`` becomes), read by :mod:`kvcalc.planning.servecmd_sglang`
ATTENTION_DP_FLAGS = ("--attn-dp-size", "--attention-data-parallel-size")
#: vLLM's optimisation-level flag (``-O3`` is rewritten to it by FlexibleArgumentParser)
LEVEL_FLAG = "--optimization-level"


class FlagClass(str, Enum):
    MODELLED = "modelled"
    NO_EFFECT = "no effect on memory"
    NOT_MODELLED = "not modelled"


@dataclass(frozen=True)
class Dialect:
    """One engine's serving flags and how kvcalc reads them."""

    table: FlagTable
    #: a setting's spellings in this engine's command (``Setting.serve``, ``Setting.sglang``)
    spellings: Callable[[Setting], tuple[str, ...]]
    #: option strings modelled outside the settings table (vLLM's compilation flags)
    also_modelled: frozenset[str]
    #: flag dests read as engine options (``-E KEY``): SGLang's ``page_size``, ...
    option_dests: frozenset[str]
    no_effect: frozenset[str]
    no_effect_values: dict[str, frozenset[str]]
    reason: Callable[[str], str | None]

    @property
    def modelled_options(self) -> frozenset[str]:
        spelled = {o for s in SETTINGS for o in self.spellings(s) if "." not in o}
        return frozenset(spelled) | self.also_modelled

    def setting_for(self, flag: EngineFlag) -> Setting | None:
        """The setting that reads ``flag`` (``None``: a compilation flag or an engine option)."""
        return next((s for s in SETTINGS if set(self.spellings(s)) & set(flag.options)), None)


@lru_cache(maxsize=1)
def vllm_dialect() -> Dialect:
    return Dialect(
        table=vllm_flags.serve_flags(), spellings=lambda s: s.serve,
        also_modelled=frozenset({*COMPILATION_FLAGS, LEVEL_FLAG}),
        option_dests=vllm_flags.ENGINE_OPTION_DESTS,
        no_effect=vllm_flags.NO_EFFECT, no_effect_values=vllm_flags.NO_EFFECT_VALUES,
        reason=vllm_flags.unmodelled_reason,
    )  # fmt: skip


@lru_cache(maxsize=1)
def sglang_dialect() -> Dialect:
    from kvcalc.engines.sglang import server_flags as sglang_flags
    from kvcalc.engines.sglang.defaults import EXTRA_KEYS as SGLANG_OPTIONS

    # --mem-fraction-static is a setting's spelling (the memory fraction), not the -E option
    return Dialect(
        table=sglang_flags.server_flags(), spellings=lambda s: s.sglang,
        also_modelled=frozenset({*ATTENTION_DP_FLAGS, "--cuda-graph-config"}),
        option_dests=frozenset(SGLANG_OPTIONS) - {"mem_fraction_static"},
        no_effect=sglang_flags.NO_EFFECT, no_effect_values=sglang_flags.NO_EFFECT_VALUES,
        reason=sglang_flags.unmodelled_reason,
    )  # fmt: skip


def table() -> FlagTable:
    return vllm_dialect().table


def is_recorded_release(engine_version: str | None) -> bool:
    """Whether ``engine_version`` (``None``: the newest) is the vLLM release whose parser is
    recorded (0.33): for older releases a flag 0.33 lacks is not modelled, not refused."""
    from kvcalc.engines.vllm.defaults import resolve_profile

    return resolve_profile(engine_version)[0].name == "0.33"


def modelled_options() -> frozenset[str]:
    """The ``vllm serve`` option strings kvcalc reads: the settings' ``serve=`` spellings and
    the compilation flags (dotted keys such as ``-cc.cudagraph_mode`` are keys of ``-cc``)."""
    return vllm_dialect().modelled_options


def setting_for(flag: EngineFlag, dialect: Dialect | None = None) -> Setting | None:
    """The setting that reads ``flag`` (``None`` for the compilation flags)."""
    return (dialect or vllm_dialect()).setting_for(flag)


def classify(
    flag: EngineFlag, value: str | None = None, dialect: Dialect | None = None
) -> FlagClass:
    """The flag's class; ``value`` decides for the flags that have no effect for some values."""
    d = dialect or vllm_dialect()
    if set(flag.options) & d.modelled_options or flag.dest in d.option_dests:
        return FlagClass.MODELLED
    if flag.name in d.no_effect:
        return FlagClass.NO_EFFECT
    values = d.no_effect_values.get(flag.name)
    if values is not None and value is not None and value.strip().lower() in values:
        return FlagClass.NO_EFFECT
    return FlagClass.NOT_MODELLED


def classify_config_key(config: str, key: str) -> FlagClass:
    """The class of one key of a config flag (``compilation_config``, ``mode``)."""
    if config == "compilation_config" and key in COMPILATION_KEYS:
        return FlagClass.MODELLED
    if key in NO_EFFECT_CONFIG_KEYS.get(config, frozenset()):
        return FlagClass.NO_EFFECT
    return FlagClass.NOT_MODELLED


def check_value(flag: EngineFlag, text: str, spelled: str, dialect: Dialect | None = None) -> None:
    """Refuse what the engine refuses: a value outside argparse's choices, or outside the list
    the engine's config validates (the recorded ``validated`` lists)."""
    tab = (dialect or vllm_dialect()).table
    if not flag.accepts(text):
        raise InputError(
            f"{tab.program}: argument {spelled}: invalid choice: {text[:40]!r} "
            f"(choose from {', '.join(flag.shown_choices())})",
            hint=f"{tab.engine} refuses it; write one of its choices",
            code=CODE,
        )
    rule = tab.validated.get(flag.dest)
    if rule is None or flag.type == "_optional_type" and text in ("", "None"):
        return
    value = text.lower() if rule.get("lowercased") else text
    if value not in rule["choices"]:
        raise InputError(
            f"{tab.program}: {spelled} {text[:40]}: {tab.engine} accepts only "
            f"{', '.join(rule['choices'])} ({rule['where']})",
            hint=f"{tab.engine} refuses it at start-up; write one of its names",
            code=CODE,
        )


def not_modelled_error(
    names: list[str], *, surface: str = "cli", dialect: Dialect | None = None
) -> InputError:
    """``flag-not-modelled`` naming the flags (never their values)."""
    reason = (dialect or vllm_dialect()).reason
    groups: dict[str | None, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(reason(name.partition(".")[0]), []).append(name)
    shown = [", ".join(group) + (f" ({why})" if why else "") for why, group in groups.items()]
    count = sum(len(g) for g in groups.values())
    how = "ignore_unmodelled: true" if surface == "yaml" else "--ignore-unmodelled"
    them = "them" if count > 1 else "it"
    return InputError(
        f"kvcalc does not model {'; '.join(shown)} of the serving command: the engine reads "
        f"{them} and a plan without {them} could be wrong",
        hint=f"drop {them} to plan without, or set {how} to plan anyway (the plan is then "
        "marked as not fully modelled)",
        code="flag-not-modelled",
    )


def judge(
    reader: Any, program: str, ignore: bool, surface: str, dialect: Dialect
) -> tuple[str, ...]:
    """Refuse stray arguments and (unless ``ignore``) flags kvcalc does not model; note the rest."""
    if reader.extra:
        raise InputError(
            f"{program}: unrecognized arguments: {len(reader.extra)} argument(s) that are not "
            f"flags{' besides the model' if reader.model_flag else ''}",
            hint="the model is given once; quote values that have spaces",
            code=CODE,
        )
    unmodelled = tuple(dict.fromkeys(reader.unmodelled))
    if unmodelled and not ignore:
        raise not_modelled_error(list(unmodelled), surface=surface, dialect=dialect)
    if unmodelled:
        reader.notes.append(
            f"warning: not fully modelled: kvcalc does not model {', '.join(unmodelled)} and "
            f"leaves {'them' if len(unmodelled) > 1 else 'it'} out (ignore_unmodelled)"
        )
    if reader.no_effect:
        reader.notes.append(f"{', '.join(dict.fromkeys(reader.no_effect))}: no effect on memory")
    return unmodelled
