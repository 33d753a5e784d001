"""Hugging Face Hub I/O: ``config.json`` into the standard cache, safetensors headers, errors.

Everything goes through ``huggingface_hub`` (``hf_hub_download``, ``get_hf_file_metadata``,
``HfApi.get_safetensors_metadata``), which is imported inside the functions so that commands on
bundled models or local folders never load it. Every Hub failure leaves this module as one
:class:`~kvcalc.errors.HubError` (or ``KvcalcError``) with a stable code; see
:mod:`kvcalc.sources.hub_errors`. Sizes are checked before anything is downloaded: a ``config.json`` over
16 MiB or a safetensors index over 64 MiB is refused from its ``HEAD`` answer.

Settings are read from the environment on each call, because ``huggingface_hub.constants`` reads
them once, when it is imported: ``HF_ENDPOINT``, ``HF_HUB_CACHE`` / ``HF_HOME``,
``HF_HUB_OFFLINE``, ``HF_HUB_ETAG_TIMEOUT``. kvcalc passes them to the client explicitly. The token
is the one given (``--token``), else whatever ``huggingface_hub`` finds (``HF_TOKEN``, then the
stored ``hf auth login``). It is never part of a message, an exception or a ``repr``.

Bounded waiting: on a network error ``hf_hub_download`` retries its HEAD request for minutes
(60 s timeout, five retries) before it falls back to the cache. kvcalc first asks for the file's
metadata once, with ``timeout_s`` and no retry, so a slow or unreachable Hub fails (or falls back
to the cache) within ``timeout_s``.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from kvcalc.errors import HubError, KvcalcError
from kvcalc.frozen import frozen
from kvcalc.sources.files import CONFIG_FILE, MAX_CONFIG_BYTES  # refused before download, too
from kvcalc.sources.hub_access import (  # noqa: F401  (re-exported: part of kvcalc.sources.hub)
    DEFAULT_TIMEOUT_S,
    HubAccess,
    default_cache_dir,
    env_timeout_s,
)
from kvcalc.sources.hub_errors import (
    bad_endpoint,
    hub_error,
    hub_exceptions,
    is_transient,
    missing_file,
    not_cached,
    shown_endpoint,  # noqa: F401  (re-exported: part of kvcalc.sources.hub)
    unparsable,
)
from kvcalc.sources.safetensors_meta import (
    INDEX_FILE,
    MAX_INDEX_BYTES,
    SafetensorsWeights,
    from_hub_metadata,
    invalid,
)

DEFAULT_REVISION = "main"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@frozen
class HubConfig:
    """A ``config.json`` in the Hub cache."""

    repo_id: str
    revision: str
    #: the commit the file belongs to (``None`` if the cache layout did not tell)
    commit_hash: str | None
    path: Path
    #: ``True`` when the Hub was not asked (offline) or could not answer and the cache served it
    from_cache: bool


# -- config.json ----------------------------------------------------------------------------
def download_config(repo_id: str, *, revision: str | None = None, access: HubAccess) -> HubConfig:
    """``config.json`` of ``repo_id`` at ``revision``, downloaded into the cache or found there.

    Offline, only the cache is read. Online, a Hub that cannot be reached (or answers 5xx) falls
    back to the cache, as ``huggingface_hub`` does; a definite answer (no such repo, gated, no such
    revision, no ``config.json``) is an error even when an older copy is cached.
    """
    rev = revision or DEFAULT_REVISION
    import_client()
    if access.offline:
        cached = cached_file(repo_id, CONFIG_FILE, revision=rev, access=access)
        if cached is None:
            raise not_cached(repo_id, rev, access)
        return _hub_config(repo_id, rev, cached, from_cache=True)
    check_endpoint(access.endpoint)
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import FileMetadataError

    with quiet_client():  # its retry warnings would break the one-line error
        try:
            # One bounded HEAD, no retries: fails fast where hf_hub_download would retry for minutes.
            url = hf_hub_url(repo_id, CONFIG_FILE, revision=rev, endpoint=access.endpoint)
            meta = get_hf_file_metadata(
                url,
                token=access.token,
                timeout=access.timeout_s,
                endpoint=access.endpoint,
                library_name="kvcalc",
            )
            if meta.etag is None and meta.commit_hash is None:
                # an answer without the Hub's headers: a captive portal or a proxy's page
                raise FileMetadataError(f"{url}: no ETag and no X-Repo-Commit in the answer")
            if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
                raise KvcalcError(
                    f"{repo_id}@{rev}/config.json is {meta.size:,} bytes, over "
                    f"{MAX_CONFIG_BYTES >> 20} MiB: not a config.json (not downloaded)",
                    hint="check the repository; kvcalc needs a transformers config.json",
                    code="config-too-large",
                )
            path = hf_hub_download(
                repo_id,
                CONFIG_FILE,
                revision=rev,
                cache_dir=access.cache_dir,
                token=access.token,
                endpoint=access.endpoint,
                etag_timeout=access.timeout_s,
                library_name="kvcalc",
            )
        except hub_exceptions() as exc:
            if not is_transient(exc):
                raise hub_error(exc, repo_id=repo_id, revision=rev, access=access) from None
            cached = cached_file(repo_id, CONFIG_FILE, revision=rev, access=access)
            if cached is None:
                raise hub_error(exc, repo_id=repo_id, revision=rev, access=access) from None
            return _hub_config(repo_id, rev, cached, from_cache=True)
        return _hub_config(repo_id, rev, Path(path), from_cache=False)


def cached_file(repo_id: str, filename: str, *, revision: str, access: HubAccess) -> Path | None:
    """The cached copy of a file (by branch, tag or commit), reading only the cache folder.

    Uses ``try_to_load_from_cache``, not ``hf_hub_download(local_files_only=True)``: the latter
    builds request headers, and with them may fetch telemetry from the Hub.
    """
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(
            repo_id, filename, cache_dir=access.cache_dir, revision=revision
        )
    except (ValueError, OSError):  # an id or revision the cache cannot hold
        return None
    if found is None:
        return None
    if isinstance(found, str):
        return Path(found)
    raise missing_file(repo_id, revision, filename)  # the cache records that it does not exist


def _hub_config(repo_id: str, revision: str, path: Path, *, from_cache: bool) -> HubConfig:
    # The cache keeps each file at <cache>/models--org--name/snapshots/<commit>/<filename>.
    commit = path.parent.name if _COMMIT.match(path.parent.name) else None
    return HubConfig(
        repo_id=repo_id, revision=revision, commit_hash=commit, path=path, from_cache=from_cache
    )


# -- safetensors ----------------------------------------------------------------------------
def safetensors_weights(
    repo_id: str, *, revision: str | None = None, access: HubAccess
) -> SafetensorsWeights | None:
    """Exact weights from the safetensors headers on the Hub (HTTP range requests only).

    ``None`` offline, or when the repo has no ``model.safetensors`` nor its index.
    """
    if access.offline:
        return None
    import_client()
    check_endpoint(access.endpoint)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import NotASafetensorsRepoError

    rev = revision or DEFAULT_REVISION
    api = HfApi(endpoint=access.endpoint, token=access.token, library_name="kvcalc")
    try:
        with quiet_client():
            _check_index_size(repo_id, rev, access)
            meta = api.get_safetensors_metadata(repo_id, revision=rev, timeout=access.timeout_s)
    except NotASafetensorsRepoError:
        return None
    except hub_exceptions() as exc:
        raise hub_error(
            exc, repo_id=repo_id, revision=rev, access=access, filename="model.safetensors"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        # an index that is not the JSON object it should be (an HTML page, a list, deep nesting)
        raise unparsable(repo_id, rev) from None
    return from_hub_metadata(meta, where=f"{repo_id}@{rev}")


def _check_index_size(repo_id: str, revision: str, access: HubAccess) -> None:
    """Refuse a ``model.safetensors.index.json`` over ``MAX_INDEX_BYTES`` before
    ``get_safetensors_metadata`` downloads it whole (one HEAD; none there is fine)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError

    url = hf_hub_url(repo_id, INDEX_FILE, revision=revision, endpoint=access.endpoint)
    try:
        meta = get_hf_file_metadata(url, token=access.token, timeout=access.timeout_s,
                                    endpoint=access.endpoint, library_name="kvcalc")  # fmt: skip
    except EntryNotFoundError:
        return
    except HfHubHTTPError as exc:
        if getattr(exc.response, "status_code", None) == 404:  # a mirror without the Hub's headers
            return
        raise
    if meta.size is not None and meta.size > MAX_INDEX_BYTES:
        raise invalid(f"{repo_id}@{revision}/{INDEX_FILE}", f"index of {meta.size:,} bytes, over "
                      f"{MAX_INDEX_BYTES:,}: not downloaded")  # fmt: skip


# -- the client -----------------------------------------------------------------------------
def import_client() -> None:
    """Import the parts of ``huggingface_hub`` kvcalc uses, directly (not through the package's
    lazy attributes, which print to stdout when an import fails).

    ``huggingface_hub.constants`` parses ``HF_*`` variables when it is imported and raises on a
    value it cannot read (``HF_HUB_DOWNLOAD_TIMEOUT=abc``, ``HF_ENDPOINT=http://[x``): that is a
    ``hub-bad-environment`` error, not a crash.
    """
    try:
        import huggingface_hub.errors
        import huggingface_hub.file_download
        import huggingface_hub.hf_api  # noqa: F401  (imported for what importing it checks)
    except ValueError as exc:
        raise HubError(
            f"huggingface_hub cannot start with this environment: {exc}",
            hint="check the HF_* variables: HF_ENDPOINT must be an http(s) URL, "
            "HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT whole seconds",
            code="hub-bad-environment",
        ) from None


@contextlib.contextmanager
def quiet_client() -> Iterator[None]:
    """``huggingface_hub``'s own log (retry warnings: "Error while downloading ... Trying to
    resume") and progress bars silenced while kvcalc calls it: kvcalc reports the outcome itself."""
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    bars_were_off = are_progress_bars_disabled()
    logger.setLevel(logging.ERROR + 1)
    disable_progress_bars()  # "Parse safetensors files: 100%|███" on stderr, per sharded model
    try:
        yield
    finally:
        logger.setLevel(level)
        if not bars_were_off:
            enable_progress_bars()


def check_endpoint(endpoint: str) -> None:
    """An endpoint the client can use: an ``http(s)://host`` URL, else ``hub-bad-endpoint``."""
    try:
        parts = urlsplit(endpoint)
        _ = parts.port  # raises for a port that is not a number
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unclosed [IPv6 bracket, a port out of range
        ok = False
    if not ok or any(c.isspace() for c in endpoint):
        raise bad_endpoint(endpoint)
