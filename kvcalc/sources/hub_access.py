"""Where and how to reach the Hugging Face Hub, from explicit arguments and the environment as set now.

``huggingface_hub.constants`` reads the environment once, when it is imported; kvcalc reads it on
each call and passes the values to the client explicitly.
"""

from __future__ import annotations

import math
import os
from dataclasses import field

from kvcalc.frozen import frozen

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0
_TRUE = {"1", "on", "yes", "true"}


@frozen
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
    return value if 0 < value < math.inf else DEFAULT_TIMEOUT_S


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
