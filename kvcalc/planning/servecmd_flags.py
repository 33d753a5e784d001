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

from enum import Enum
from functools import lru_cache

from kvcalc.engines.flag_table import EngineFlag, FlagTable
from kvcalc.engines.vllm.serve_flags import (
    NO_EFFECT,
    NO_EFFECT_CONFIG_KEYS,
    NO_EFFECT_VALUES,
    serve_flags,
    unmodelled_reason,
)
from kvcalc.errors import InputError
from kvcalc.planning.servecmd_compile import FLAGS as COMPILATION_FLAGS
from kvcalc.planning.servecmd_compile import KEYS as COMPILATION_KEYS
from kvcalc.planning.settings import SETTINGS, Setting

__all__ = [
    "FlagClass",
    "check_value",
    "classify",
    "classify_config_key",
    "is_recorded_release",
    "modelled_options",
    "not_modelled_error",
    "setting_for",
    "table",
]

CODE = "invalid-serve-command"
#: vLLM's optimisation-level flag (``-O3`` is rewritten to it by FlexibleArgumentParser)
LEVEL_FLAG = "--optimization-level"


class FlagClass(str, Enum):
    MODELLED = "modelled"
    NO_EFFECT = "no effect on memory"
    NOT_MODELLED = "not modelled"


def table() -> FlagTable:
    return serve_flags()


def is_recorded_release(engine_version: str | None) -> bool:
    """Whether ``engine_version`` (``None``: the newest) is the vLLM release whose parser is
    recorded (0.33): for older releases a flag 0.33 lacks is not modelled, not refused."""
    from kvcalc.engines.vllm.defaults import resolve_profile

    return resolve_profile(engine_version)[0].name == "0.33"


@lru_cache(maxsize=1)
def modelled_options() -> frozenset[str]:
    """The option strings kvcalc reads: the settings' ``serve=`` spellings and the compilation
    flags (dotted keys such as ``-cc.cudagraph_mode`` are keys of ``-cc``, not flags)."""
    spelled = {o for s in SETTINGS for o in s.serve if "." not in o}
    return frozenset(spelled | set(COMPILATION_FLAGS) | {LEVEL_FLAG})


def setting_for(flag: EngineFlag) -> Setting | None:
    """The setting that reads ``flag`` (``None`` for the compilation flags)."""
    return next((s for s in SETTINGS if set(s.serve) & set(flag.options)), None)


def classify(flag: EngineFlag, value: str | None = None) -> FlagClass:
    """The flag's class; ``value`` decides for the flags that have no effect for some values."""
    if set(flag.options) & modelled_options():
        return FlagClass.MODELLED
    if flag.name in NO_EFFECT:
        return FlagClass.NO_EFFECT
    values = NO_EFFECT_VALUES.get(flag.name)
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


def check_value(flag: EngineFlag, text: str, spelled: str) -> None:
    """Refuse what vLLM refuses: a value outside argparse's choices, or outside the list the
    engine's config validates (the recorded ``validated`` lists)."""
    tab = table()
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


def not_modelled_error(names: list[str], *, surface: str = "cli") -> InputError:
    """``flag-not-modelled`` naming the flags (never their values)."""
    groups: dict[str | None, list[str]] = {}
    for name in dict.fromkeys(names):
        groups.setdefault(unmodelled_reason(name.partition(".")[0]), []).append(name)
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
