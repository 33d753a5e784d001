"""Hugging Face Hub I/O: ``config.json`` into the standard cache, safetensors headers, errors.

Everything goes through ``huggingface_hub`` (``hf_hub_download``, ``get_hf_file_metadata``,
``HfApi.get_safetensors_metadata``), which is imported inside the functions so that commands on
bundled models or local folders never load it. Every Hub failure leaves this module as one
:class:`~kvcalc.errors.HubError` (or ``KvcalcError``) with a stable code; see :func:`hub_error`.

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

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from kvcalc.errors import HubError, KvcalcError
from kvcalc.safetensors_meta import SafetensorsWeights, from_hub_metadata

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_REVISION = "main"
CONFIG_FILE = "config.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True, kw_only=True)
class HubAccess:
    """Where and how to reach the Hub. The token is left out of ``repr`` and comparisons."""

    endpoint: str
    cache_dir: str
    offline: bool
    timeout_s: float
    token: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_env(
        cls,
        *,
        token: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        offline: bool | None = None,
        timeout_s: float | None = None,
        endpoint: str | None = None,
    ) -> HubAccess:
        """Explicit arguments first, then the environment as it is now, then the defaults."""
        return cls(
            endpoint=(endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            cache_dir=str(cache_dir) if cache_dir else default_cache_dir(),
            offline=env_offline() if offline is None else offline,
            timeout_s=timeout_s if timeout_s is not None else env_timeout_s(),
            token=token or None,
        )


@dataclass(frozen=True, kw_only=True)
class HubConfig:
    """A ``config.json`` in the Hub cache."""

    repo_id: str
    revision: str
    #: the commit the file belongs to (``None`` if the cache layout did not tell)
    commit_hash: str | None
    path: Path
    #: ``True`` when the Hub was not asked (offline) or could not answer and the cache served it
    from_cache: bool


def env_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as set now."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def env_timeout_s() -> float:
    """``HF_HUB_ETAG_TIMEOUT`` seconds as set now, else 10."""
    try:
        value = float(os.environ.get("HF_HUB_ETAG_TIMEOUT", ""))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


def default_cache_dir() -> str:
    """The Hub cache as ``huggingface_hub`` would choose it with the environment as set now."""
    env = os.environ
    explicit = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return os.path.expanduser(os.path.expandvars(explicit))
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"
    )
    return os.path.expanduser(os.path.expandvars(os.path.join(home, "hub")))


# -- config.json ----------------------------------------------------------------------------
def download_config(repo_id: str, *, revision: str | None = None, access: HubAccess) -> HubConfig:
    """``config.json`` of ``repo_id`` at ``revision``, downloaded into the cache or found there.

    Offline, only the cache is read. Online, a Hub that cannot be reached (or answers 5xx) falls
    back to the cache, as ``huggingface_hub`` does; a definite answer (no such repo, gated, no such
    revision, no ``config.json``) is an error even when an older copy is cached.
    """
    rev = revision or DEFAULT_REVISION
    if access.offline:
        cached = cached_file(repo_id, CONFIG_FILE, revision=rev, access=access)
        if cached is None:
            raise not_cached(repo_id, rev, access)
        return _hub_config(repo_id, rev, cached, from_cache=True)
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    try:
        # One bounded HEAD, no retries: fails fast where hf_hub_download would retry for minutes.
        url = hf_hub_url(repo_id, CONFIG_FILE, revision=rev, endpoint=access.endpoint)
        get_hf_file_metadata(
            url,
            token=access.token,
            timeout=access.timeout_s,
            endpoint=access.endpoint,
            library_name="kvcalc",
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
    except _hub_exceptions() as exc:
        if not _is_transient(exc):
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
    from huggingface_hub import HfApi
    from huggingface_hub.errors import NotASafetensorsRepoError

    rev = revision or DEFAULT_REVISION
    api = HfApi(endpoint=access.endpoint, token=access.token, library_name="kvcalc")
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=rev, timeout=access.timeout_s)
    except NotASafetensorsRepoError:
        return None
    except _hub_exceptions() as exc:
        raise hub_error(
            exc, repo_id=repo_id, revision=rev, access=access, filename="model.safetensors"
        ) from None
    return from_hub_metadata(meta, where=f"{repo_id}@{rev}")


# -- errors ---------------------------------------------------------------------------------
def _transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeouts, other network failures) of whichever HTTP library the client has loaded."""
    timeouts: list[type[BaseException]] = [TimeoutError]
    network: list[type[BaseException]] = [ConnectionError]
    for module, timeout_name, network_name in (
        ("httpx2", "TimeoutException", "TransportError"),
        ("httpx", "TimeoutException", "TransportError"),
        ("requests", "Timeout", "ConnectionError"),
    ):
        loaded = sys.modules.get(module)
        if loaded is not None:
            timeouts.append(getattr(loaded, timeout_name))
            network.append(getattr(loaded, network_name))
    return tuple(timeouts), tuple(network)


def _hub_exceptions() -> tuple[type[BaseException], ...]:
    """Every exception a Hub call can raise for reasons outside kvcalc."""
    from huggingface_hub import errors

    timeouts, network = _transport_errors()
    return (
        errors.HfHubHTTPError,
        errors.EntryNotFoundError,
        errors.OfflineModeIsEnabled,
        errors.FileMetadataError,
        errors.HFValidationError,
        errors.SafetensorsParsingError,
        *timeouts,
        *network,
    )


def _is_transient(exc: BaseException) -> bool:
    """Network trouble or a Hub outage: worth falling back to the cache."""
    from huggingface_hub import errors

    timeouts, network = _transport_errors()
    if isinstance(
        exc, (*timeouts, *network, errors.OfflineModeIsEnabled, errors.FileMetadataError)
    ):
        return True
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return isinstance(exc, errors.HfHubHTTPError) and status in (429, 500, 502, 503, 504)


def shown_endpoint(endpoint: str) -> str:
    """The endpoint without any ``user:password@`` part, for messages."""
    parts = urlsplit(endpoint)
    if "@" not in parts.netloc:
        return endpoint
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def not_cached(repo_id: str, revision: str, access: HubAccess) -> HubError:
    return HubError(
        f"{repo_id}@{revision} is not in the Hub cache ({access.cache_dir}) and offline mode is on",
        hint="run once without --offline (and without HF_HUB_OFFLINE=1) to cache it, "
        "or use a bundled model or a local folder",
        code="hub-not-cached",
    )


def missing_file(repo_id: str, revision: str, filename: str) -> HubError:
    if filename == CONFIG_FILE:
        return HubError(
            f"{repo_id}@{revision} has no config.json",
            hint="kvcalc needs a transformers config.json (GGUF-only or diffusers "
            "repositories have none); pass a local folder with one instead",
            code="hub-no-config",
        )
    return HubError(f"{repo_id}@{revision} has no {filename}", code="hub-file-not-found")


def hub_error(
    exc: BaseException,
    *,
    repo_id: str,
    revision: str,
    access: HubAccess,
    filename: str = CONFIG_FILE,
) -> KvcalcError:
    """One clear :class:`HubError` for a ``huggingface_hub`` or network exception.

    Messages are built from the repo, revision and endpoint only, never from the exception's own
    text (which carries URLs and request details), so no token can leak into them.
    """
    from huggingface_hub import errors

    where = f"{repo_id}@{revision}"
    endpoint = shown_endpoint(access.endpoint)
    page = f"{endpoint}/{repo_id}"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    timeouts, network = _transport_errors()
    offline_hint = (
        "use --offline with a model already in the Hub cache, a bundled model, or a local folder"
    )
    if isinstance(exc, errors.GatedRepoError):
        if status == 403:
            hint = f"the token in use has no access: request it at {page} with that account"
        else:
            hint = (
                f"request access at {page}, then pass --token, set HF_TOKEN or run `hf auth login`"
            )
        return HubError(
            f"{repo_id} is a gated repository: access must be granted first",
            hint=hint,
            code="hub-gated",
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return HubError(
            f"repository {repo_id} not found on {endpoint}",
            hint="check the org/name spelling; a private repository needs --token, HF_TOKEN or "
            "`hf auth login`",
            code="hub-repo-not-found",
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return HubError(
            f"revision {revision!r} not found in {repo_id}",
            hint="use an existing branch, tag or commit hash (org/name@revision)",
            code="hub-revision-not-found",
        )
    if isinstance(exc, errors.EntryNotFoundError) and not isinstance(
        exc, errors.LocalEntryNotFoundError
    ):
        return missing_file(repo_id, revision, filename)
    if isinstance(exc, errors.LocalEntryNotFoundError) and exc.__cause__ is not None:
        # hf_hub_download could not ask the Hub and found no cached copy: report why it could not
        return hub_error(
            exc.__cause__, repo_id=repo_id, revision=revision, access=access, filename=filename
        )
    if isinstance(exc, (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled)):
        return not_cached(repo_id, revision, access)
    if isinstance(exc, errors.HFValidationError):
        return HubError(
            f"{repo_id!r} is not a valid Hub repository id",
            hint="use org/name, e.g. Qwen/Qwen3-8B",
            code="hub-invalid-repo-id",
        )
    if isinstance(exc, errors.SafetensorsParsingError):
        return KvcalcError(
            f"{where}: a safetensors header could not be parsed",
            hint="the checkpoint may be corrupt; weights were not sized",
            code="safetensors-invalid",
        )
    if isinstance(exc, errors.FileMetadataError):
        return HubError(
            f"{endpoint} does not answer like a Hugging Face Hub",
            hint="check HF_ENDPOINT, proxy and firewall settings; or " + offline_hint,
            code="hub-bad-response",
        )
    if isinstance(exc, errors.HfHubHTTPError) and status is not None:
        return _http_status_error(status, where, endpoint)
    if isinstance(exc, timeouts):
        return HubError(
            f"the Hub at {endpoint} did not answer within {access.timeout_s:g} s "
            f"(fetching {where})",
            hint="retry, raise HF_HUB_ETAG_TIMEOUT, or " + offline_hint,
            code="hub-timeout",
        )
    if isinstance(exc, network):
        return HubError(
            f"cannot reach the Hub at {endpoint} (fetching {where})",
            hint="check the network and HF_ENDPOINT, or " + offline_hint,
            code="hub-unreachable",
        )
    return HubError(
        f"the Hub request for {where} failed ({type(exc).__name__})",
        hint="retry, or " + offline_hint,
        code="hub-error",
    )


def _http_status_error(status: int, where: str, endpoint: str) -> HubError:
    if status == 401:
        return HubError(
            f"the Hub rejected the token for {where} (HTTP 401)",
            hint="check --token / HF_TOKEN, or run `hf auth login` again",
            code="hub-unauthorized",
        )
    if status == 403:
        return HubError(
            f"the token in use may not read {where} (HTTP 403)",
            hint="use a token with read access to this repository",
            code="hub-forbidden",
        )
    if status == 429:
        return HubError(
            f"the Hub rate-limited the request for {where} (HTTP 429)",
            hint="wait a minute, log in (`hf auth login`) for higher limits, or use --offline",
            code="hub-rate-limited",
        )
    return HubError(
        f"the Hub at {endpoint} answered HTTP {status} for {where}",
        hint="retry later, or use --offline with a cached model or a bundled model",
        code="hub-http-error",
    )
