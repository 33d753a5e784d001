"""Local ``config.json`` files, read as bounded, well-formed JSON or refused with one error.

The limits here apply wherever a config comes from: a folder, the Hub cache, a verify run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvcalc.errors import ConfigError

#: the file a model folder must hold
CONFIG_FILE = "config.json"

#: ``config.json`` files are a few kB; anything past this is not a config.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
#: real configs nest 3 or 4 levels (``text_config.rope_scaling...``); far deeper is not a config,
#: and would exhaust the recursion limit of whatever prints it
MAX_CONFIG_DEPTH = 64


# -- reading JSON ---------------------------------------------------------------------------
def read_config_json(
    path: Path, *, label: str | None = None, max_bytes: int = MAX_CONFIG_BYTES, cached: bool = False
) -> Any:
    """The JSON in ``path``: at most ``max_bytes``, UTF-8, well-formed, or a one-line error
    (``cached``: a file of the Hub cache, which the hint offers to download again)."""
    where = label or str(path)
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {where}: {exc.strerror or exc}", code="config-unreadable"
        ) from None
    if len(data) > max_bytes:
        raise ConfigError(
            f"{where} is over {max_bytes // (1024 * 1024)} MiB: not a config.json",
            hint="pass the model's config.json, not a weights file",
            code="config-too-large",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{where} is not UTF-8 text (bad byte at offset {exc.start})",
            hint="config.json must be UTF-8 JSON; re-download or re-save it",
            code="config-not-utf8",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip()[:1] == "<":  # a login page or an error page from a proxy or mirror
            problem = "an HTML page, not JSON"
        else:
            problem = f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise ConfigError(
            f"{where}: {problem}",
            hint="delete it from the Hub cache to download it again"
            if cached
            else "fix the file: it is not the JSON a config.json holds",
            code="config-malformed-json",
        ) from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        reason = str(exc).split(";")[0]
        raise ConfigError(
            f"{where}: unreadable JSON: {reason}", code="config-malformed-json"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"{where}: JSON nested too deeply", code="config-malformed-json"
        ) from None
    if _nested_deeper(data, MAX_CONFIG_DEPTH):
        raise ConfigError(
            f"{where}: JSON nested more than {MAX_CONFIG_DEPTH} levels deep: not a config.json",
            code="config-malformed-json",
        )
    return data


def _nested_deeper(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than ``limit`` levels (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
