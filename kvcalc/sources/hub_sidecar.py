"""Optional files beside ``config.json`` on the Hub: ModelOpt's ``hf_quant_config.json``.

vLLM 0.33 (``transformers_utils/config.py``) reads ``hf_quant_config.json`` when ``config.json``
has no ``quantization_config`` (ModelOpt 0.29 and before wrote the checkpoint's quantization
there); it decides what ``--kv-cache-dtype auto`` becomes. kvcalc reads it the same way, through
``huggingface_hub``, into the same cache and under the same offline rules as ``config.json``:

* a repository without the file has no sidecar (not an error); ``hf_hub_download`` records the
  absence in the cache (``.no_exist``), so offline runs know it too;
* offline, or when the Hub did not answer and ``config.json`` came from the cache, only the cache
  is read; a cache that records neither the file nor its absence is ``hub-not-cached``: kvcalc
  cannot tell whether the checkpoint is quantized, and does not guess;
* any other failure is the same coded ``hub-*`` error as for ``config.json``.

The file is asked for at the commit ``config.json`` came from, so the two always match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvcalc.errors import HubError, KvcalcError
from kvcalc.sources.files import MAX_CONFIG_BYTES, read_config_json
from kvcalc.sources.hub import HubAccess, check_endpoint, import_client, quiet_client
from kvcalc.sources.hub_errors import hub_error, hub_exceptions, is_transient

#: ModelOpt's quantization sidecar (``hf_quant_config.json``)
QUANT_SIDECAR = "hf_quant_config.json"


def quant_sidecar(repo_id: str, *, revision: str, access: HubAccess, cache_only: bool) -> Any:
    """The parsed ``hf_quant_config.json`` of ``repo_id`` at ``revision``, ``None`` when the
    repository has none. ``cache_only``: read the cache alone (``config.json`` came from it)."""
    import_client()
    path = _cached(repo_id, QUANT_SIDECAR, revision, access)
    if path is None and (cache_only or access.offline):
        raise _unknown(repo_id, revision, access)
    if path is None:
        path = _download(repo_id, QUANT_SIDECAR, revision, access)
    if path is False:
        return None
    assert isinstance(path, Path)
    return read_config_json(path, label=f"{repo_id}@{revision}/{QUANT_SIDECAR}", cached=True)


def _cached(repo_id: str, filename: str, revision: str, access: HubAccess) -> Path | bool | None:
    """What the cache knows: the file's path, ``False`` (recorded absent), ``None`` (nothing)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(
            repo_id, filename, cache_dir=access.cache_dir, revision=revision
        )
    except (ValueError, OSError):
        return None
    if found is None:
        return None
    return Path(found) if isinstance(found, str) else False


def _download(repo_id: str, filename: str, revision: str, access: HubAccess) -> Path | bool:
    """Download ``filename`` (``False`` if the repository has none), after one bounded HEAD."""
    check_endpoint(access.endpoint)
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    def fetch() -> Path:
        return Path(
            hf_hub_download(
                repo_id,
                filename,
                revision=revision,
                cache_dir=access.cache_dir,
                token=access.token,
                endpoint=access.endpoint,
                etag_timeout=access.timeout_s,
                library_name="kvcalc",
            )  # fmt: skip
        )

    with quiet_client():
        try:
            url = hf_hub_url(repo_id, filename, revision=revision, endpoint=access.endpoint)
            try:
                meta = get_hf_file_metadata(url, token=access.token, timeout=access.timeout_s,
                                            endpoint=access.endpoint, library_name="kvcalc")  # fmt: skip
            except EntryNotFoundError as exc:
                if isinstance(exc, LocalEntryNotFoundError):
                    raise
                try:  # the Hub says there is none: let the client record that in the cache
                    fetch()
                except EntryNotFoundError as again:
                    if isinstance(again, LocalEntryNotFoundError):
                        raise
                return False
            if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
                raise KvcalcError(
                    f"{repo_id}@{revision}/{filename} is {meta.size:,} bytes, over "
                    f"{MAX_CONFIG_BYTES >> 20} MiB: not a quantization config (not downloaded)",
                    hint="check the repository; the file should be a few kB of JSON",
                    code="config-too-large",
                )
            return fetch()
        except hub_exceptions() as exc:
            known = _cached(repo_id, filename, revision, access) if is_transient(exc) else None
            if known is not None:  # the Hub did not answer; the cache knows
                return known
            raise hub_error(
                exc, repo_id=repo_id, revision=revision, access=access, filename=filename
            ) from None


def _unknown(repo_id: str, revision: str, access: HubAccess) -> HubError:
    return HubError(
        f"{repo_id}@{revision}: the Hub cache ({access.cache_dir}) does not say whether the "
        f"checkpoint has a {QUANT_SIDECAR}, which decides vLLM's `auto` KV cache dtype, and the "
        "Hub is not being asked (offline, or it did not answer)",
        hint="run once online to cache it, or pass the checkpoint's folder",
        code="hub-not-cached",
    )
