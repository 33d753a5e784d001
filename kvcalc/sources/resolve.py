"""Model references → a parsed model, from a local path, a bundled config or the Hub.

A reference is resolved in this order:

1. **A path**: anything that exists on disk, or that looks like a path (starts with ``.``, ``/`` or
   ``~``, has a backslash or more than one ``/``, or ends with ``.json``). A folder means its
   ``config.json``; the safetensors files beside a ``config.json`` give exact weights.
2. **A bundled model**, by Hub id (``Qwen/Qwen3-8B``) or short alias (``qwen3-8b``), unless a
   revision is pinned: the bundled configs are snapshots without one.
3. **The Hub**, for ``org/name`` or ``org/name@revision``: ``config.json`` (and ModelOpt's
   ``hf_quant_config.json`` when the config has no ``quantization_config``, as vLLM reads it) through
   ``hf_hub_download`` into the standard Hub cache. Offline (``offline=True`` or
   ``HF_HUB_OFFLINE=1``) only the cache is read and the network is never touched.

Configs are read as JSON and nothing else: a model that needs ``trust_remote_code`` is parsed from
its ``config.json`` like any other, and none of its code is ever downloaded or run.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from kvcalc.errors import InputError, ModelNotFoundError
from kvcalc.hfconfig import parse_config
from kvcalc.sources.bundled import BundledModel, find_bundled
from kvcalc.sources.files import CONFIG_FILE, read_config_json
from kvcalc.sources.loaded import LoadedModel, no_weights

if TYPE_CHECKING:  # the Hub client and safetensors reading load only on the paths that need them
    from kvcalc.sources import hub
    from kvcalc.sources.safetensors_meta import SafetensorsWeights

#: ``org/name`` as the Hub spells repository ids.
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")


def load_model(
    reference: str,
    *,
    revision: str | None = None,
    token: str | None = None,
    offline: bool | None = None,
    cache_dir: str | None = None,
    timeout_s: float | None = None,
    trust_layout: bool = False,
) -> LoadedModel:
    """Resolve ``reference`` (path, bundled model, ``org/name[@revision]``) and parse its config.

    ``token`` defaults to ``HF_TOKEN`` or the stored login; ``offline`` to ``HF_HUB_OFFLINE``;
    ``timeout_s`` (per Hub request) to ``HF_HUB_ETAG_TIMEOUT`` or 10 s. ``trust_layout`` parses
    a config the registry does not verify as plain attention instead of refusing it.
    """
    text = reference.strip()
    if not text:
        raise InputError(
            "the model reference is empty",
            hint="pass a Hub id (org/name), a bundled alias, or a folder",
        )
    path = Path(text).expanduser()
    if _exists(path):
        if revision:
            raise InputError(f"{text} is a local path; --revision only applies to Hub models")
        if path.suffix.lower() == ".gguf" and path.is_file():
            from kvcalc.sources.gguf.load import load_gguf_path

            return load_gguf_path(path)
        return load_path(path, trust_layout=trust_layout)
    if ":" in text and "\\" not in text:  # org/name:Q4_K_M or org/name:FILE.gguf
        from kvcalc.sources.gguf.load import HUB_GGUF, load_gguf_hub

        name, rev = split_revision(text, revision)
        if match := HUB_GGUF.match(name):
            from kvcalc.sources import hub

            access = hub.HubAccess.from_env(token=token, cache_dir=cache_dir, offline=offline,
                                            timeout_s=timeout_s)  # fmt: skip
            return load_gguf_hub(match["repo"], match["choice"], revision=rev, access=access)
    if looks_like_path(text):
        raise ModelNotFoundError(
            f"no such file or folder: {text}",
            hint="check the path, or pass a Hub id as org/name",
            code="path-not-found",
        )
    name, rev = split_revision(text, revision)
    if rev is None and (bundled := find_bundled(name)) is not None:
        return load_bundled(bundled, trust_layout=trust_layout)
    if _REPO_ID.match(name):
        from kvcalc.sources import hub

        access = hub.HubAccess.from_env(
            token=token, cache_dir=cache_dir, offline=offline, timeout_s=timeout_s
        )
        return load_hub(name, revision=rev, access=access, trust_layout=trust_layout)
    close = close_bundled(name)
    raise ModelNotFoundError(
        f"unknown model {text!r}: not a file or folder, a bundled model, or a Hub id",
        hint=(f"did you mean {' or '.join(repr(c) for c in close)}? " if close else "")
        + "`kvcalc models` lists the bundled models; use org/name for the Hub "
        "(e.g. Qwen/Qwen3-8B), or a path",
        code="model-not-found",
    )


def close_bundled(name: str, limit: int = 3) -> list[str]:
    """Bundled aliases close to ``name``: those it begins (``llama-2-7b`` → ``llama-2-7b-hf``),
    then the nearest spellings.

    >>> close_bundled("llama-2-7b")
    ['llama-2-7b-hf']
    """
    import difflib

    from kvcalc.sources.bundled import bundled_models

    low = name.lower().rsplit("/", 1)[-1]
    aliases = sorted(m.alias for m in bundled_models())
    starts = [a for a in aliases if a.startswith(low) and a != low]
    near = difflib.get_close_matches(low, aliases, n=limit, cutoff=0.8)
    return (starts or near)[:limit]


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte...
        return False


def looks_like_path(text: str) -> bool:
    return (
        text.startswith((".", "/", "~"))
        or "\\" in text
        or text.count("/") > 1
        or text.lower().endswith(".json")
        or bool(os.altsep and os.altsep in text)
    )


def split_revision(text: str, revision: str | None) -> tuple[str, str | None]:
    """``org/name@rev`` → ``("org/name", "rev")``; ``revision`` must not contradict it."""
    name, at, rev = text.partition("@")
    if not at:
        return text, revision or None
    if not rev or not name:
        raise InputError(f"{text!r}: expected org/name@revision")
    if revision and revision != rev:
        raise InputError(
            f"{text!r} pins revision {rev!r} but --revision says {revision!r}",
            hint="give the revision once",
        )
    return name, rev


# -- the three sources ----------------------------------------------------------------------
def load_path(path: Path, *, trust_layout: bool = False) -> LoadedModel:
    """A model folder (its ``config.json``) or a config file."""
    config = path / CONFIG_FILE if path.is_dir() else path
    if not config.is_file():
        ggufs = sorted(p.name for p in path.glob("*.gguf")) if path.is_dir() else []
        raise ModelNotFoundError(
            f"{path} has no config.json",
            hint=f"pass one of its GGUF files, e.g. {path / ggufs[0]}"
            if ggufs
            else "pass the folder of a transformers checkpoint, the config file itself, or a .gguf file",
            code="config-missing",
        )
    raw = read_config_json(config)
    folder = config.parent.resolve()
    named_config = config.name == CONFIG_FILE
    sidecar = folder / "hf_quant_config.json"
    hf_quant = read_config_json(sidecar) if named_config and sidecar.is_file() else None
    shape = parse_config(raw, name=folder.name if named_config else config.stem, source=str(config),
                         hf_quant_config=hf_quant,
                         trust_layout=trust_layout)  # fmt: skip
    # Only a config.json has "its" checkpoint beside it; a loose foo.json may sit among others.
    weights = cache(lambda: _read_local_weights(folder)) if named_config else no_weights
    return LoadedModel(
        shape=shape, source="path", location=str(config), config_path=config, _weights=weights
    )


def load_bundled(model: BundledModel, *, trust_layout: bool = False) -> LoadedModel:
    shape = parse_config(model.load(), name=model.hf_id, source=f"bundled config {model.path.name}",
                         trust_layout=trust_layout)  # fmt: skip
    return LoadedModel(
        shape=shape, source="bundled", location=str(model.path), config_path=model.path
    )


def _read_local_weights(folder: Path) -> SafetensorsWeights | None:
    from kvcalc.sources.safetensors_files import read_local_weights

    return read_local_weights(folder)


def load_hub(
    repo_id: str, *, revision: str | None, access: hub.HubAccess, trust_layout: bool = False
) -> LoadedModel:
    from kvcalc.sources import hub
    from kvcalc.sources.hub_sidecar import quant_sidecar

    found = hub.download_config(repo_id, revision=revision, access=access)
    label = f"{repo_id}@{found.revision}/config.json"
    raw = read_config_json(found.path, label=label, cached=True)
    pinned = found.commit_hash or found.revision
    # vLLM reads ModelOpt's sidecar only when config.json has no quantization_config
    needs_sidecar = isinstance(raw, dict) and raw.get("quantization_config") is None
    sidecar = (quant_sidecar(repo_id, revision=pinned, access=access, cache_only=found.from_cache)
               if needs_sidecar else None)  # fmt: skip
    shape = parse_config(raw, name=repo_id, source=label, hf_quant_config=sidecar,
                         trust_layout=trust_layout)  # fmt: skip

    def weights() -> SafetensorsWeights | None:
        if found.from_cache:  # offline, or the Hub did not answer a moment ago
            return None
        return hub.safetensors_weights(repo_id, revision=pinned, access=access)

    return LoadedModel(
        shape=shape,
        source="hub",
        location=f"{repo_id}@{found.revision}",
        revision=found.revision,
        commit_hash=found.commit_hash,
        config_path=found.path,
        from_cache=found.from_cache,
        _weights=cache(weights),
    )
