"""Hub and network exceptions, each turned into one :class:`~kvcalc.errors.KvcalcError` with a
stable ``hub-*`` code (docs/errors.md), and which of them are worth falling back to the cache for.

Messages are built from the repository, revision and endpoint only, never from an exception's own
text (which carries URLs and request details), so no token can leak into them. Exception classes are
looked up in whichever HTTP library ``huggingface_hub`` has loaded, so this module imports none.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from kvcalc.errors import HubError, KvcalcError
from kvcalc.sources.files import CONFIG_FILE

if TYPE_CHECKING:
    from kvcalc.sources.hub_access import HubAccess


# -- which exceptions, and which are transient ---------------------------------------------
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


def _protocol_errors() -> tuple[type[BaseException], ...]:
    """Answers that are not HTTP as the client expects: a redirect loop, an undecodable body
    (httpx's ``TooManyRedirects``, ``DecodingError``, which are not transport errors), an endpoint
    it cannot parse (``InvalidURL``)."""
    found: list[type[BaseException]] = []
    for module in ("httpx2", "httpx"):
        loaded = sys.modules.get(module)
        if loaded is not None:
            found += [
                getattr(loaded, n) for n in ("TooManyRedirects", "DecodingError", "InvalidURL")
            ]
    loaded = sys.modules.get("requests")
    if loaded is not None:
        found += [loaded.TooManyRedirects, loaded.exceptions.InvalidURL]
    return tuple(found)


def hub_exceptions() -> tuple[type[BaseException], ...]:
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
        *_protocol_errors(),
    )


def is_transient(exc: BaseException) -> bool:
    """Network trouble or a Hub outage: worth falling back to the cache."""
    from huggingface_hub import errors

    timeouts, network = _transport_errors()
    if isinstance(
        exc, (*timeouts, *network, errors.OfflineModeIsEnabled, errors.FileMetadataError)
    ):
        return True
    if isinstance(exc, _protocol_errors()) and "InvalidURL" not in type(exc).__name__:
        return True  # a proxy or portal in the way: the cached copy is still good
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return isinstance(exc, errors.HfHubHTTPError) and status in (429, 500, 502, 503, 504)


# -- messages ------------------------------------------------------------------------------
def shown_endpoint(endpoint: str) -> str:
    """The endpoint without any ``user:password@`` part, for messages."""
    try:
        parts = urlsplit(endpoint)
    except ValueError:  # not a URL at all: show it without anything up to an "@"
        return endpoint.rpartition("@")[2]
    if "@" not in parts.netloc:
        return endpoint
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


#: the name endings of chat/instruction fine-tunes, which keep their base model's config
_TUNE_SUFFIX = re.compile(r"-(instruct|it|chat|hf)$", re.IGNORECASE)


def bundled_sibling(repo_id: str) -> str | None:
    """The bundled model that differs from ``repo_id`` only by a fine-tune's name ending
    (``-Instruct``, ``-it``, ``-Chat``, ``-hf``), as ``'Org/Name' (alias)``; None if none does."""
    from kvcalc.sources.bundled import bundled_models

    key = _TUNE_SUFFIX.sub("", repo_id.strip()).lower()
    for model in bundled_models():
        if (
            model.hf_id.lower() != repo_id.strip().lower()
            and _TUNE_SUFFIX.sub("", model.hf_id).lower() == key
        ):
            return f"{model.hf_id} ({model.alias})"
    return None


def not_cached(repo_id: str, revision: str, access: HubAccess) -> HubError:
    sibling = bundled_sibling(repo_id)
    if sibling:
        hint = (f"kvcalc bundles {sibling}: the same model up to the fine-tune's name ending "
                "(a fine-tune keeps its base model's layers); plan that, or run once without "
                "--offline to cache this one")  # fmt: skip
    else:
        hint = ("run once without --offline (and without HF_HUB_OFFLINE=1) to cache it, "
                "or use a bundled model (`kvcalc models`) or a local folder")  # fmt: skip
    return HubError(
        f"{repo_id}@{revision} is not in the Hub cache ({access.cache_dir}) and offline mode is on",
        hint=hint,
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
    return HubError(
        f"{repo_id}@{revision} has no {filename} (or a shard its index names)",
        hint="the checkpoint on the Hub is incomplete; --weights-memory SIZE skips exact weights",
        code="hub-file-not-found",
    )


def bad_endpoint(endpoint: str) -> HubError:
    return HubError(
        f"the Hub endpoint {shown_endpoint(endpoint)!r} is not a usable http(s) URL",
        hint="set HF_ENDPOINT to https://huggingface.co or your mirror's URL, or unset it",
        code="hub-bad-endpoint",
    )


def unparsable(repo_id: str, revision: str) -> KvcalcError:
    return KvcalcError(
        f"{repo_id}@{revision}: a safetensors header could not be parsed",
        hint="the checkpoint may be corrupt, or a proxy answered instead of the Hub; weights "
        "were not sized",
        code="safetensors-invalid",
    )


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
    timeouts, _ = _transport_errors()
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
        return unparsable(repo_id, revision)
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
    name = type(exc).__name__
    if name == "InvalidURL":
        return bad_endpoint(access.endpoint)
    if name in ("TooManyRedirects", "DecodingError"):
        what = (
            "redirects in a loop" if name == "TooManyRedirects" else "sent a body it cannot decode"
        )
        return HubError(
            f"{endpoint} {what} (fetching {where}): it does not answer like a Hugging Face Hub",
            hint="check HF_ENDPOINT, proxy and firewall settings; or " + offline_hint,
            code="hub-bad-response",
        )
    # what is left is a network failure (_hub_exceptions lists nothing else)
    if name in ("RemoteProtocolError", "ChunkedEncodingError"):
        message = f"the Hub at {endpoint} closed the connection before a complete answer (fetching {where})"
    else:
        message = f"cannot reach the Hub at {endpoint} (fetching {where})"
    return HubError(
        message,
        hint="check the network and HF_ENDPOINT, or " + offline_hint,
        code="hub-unreachable",
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
