"""What Gemma 4 and Gemma-3n read alike: ``layer_types`` (sliding or full per layer) and KV sharing
(the last ``num_kv_shared_layers`` layers read the cache of the last earlier layer of their type)."""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.reader import ConfigReader


def layer_types(r: ConfigReader, num_layers: int, prov: dict[str, str]) -> list[L.MixerKind]:
    types = r.list("layer_types")
    if types is None:
        raise r.missing(("layer_types",))
    if len(types) != num_layers or any(
        t not in ("sliding_attention", "full_attention") for t in types
    ):
        raise ConfigError(
            f"{r.source}: {r.path('layer_types')} must list sliding_attention or full_attention "
            f"for each of {num_layers} layers",
            code="config-invalid",
        )
    kinds: list[L.MixerKind] = [L.SLIDING if t == "sliding_attention" else L.FULL for t in types]
    prov["layer pattern"] = "layer_types lists each layer"
    return kinds


def shared_sources(
    r: ConfigReader, kinds: list[L.MixerKind], default: int, prov: dict[str, str]
) -> dict[int, int]:
    """``{consumer layer: source layer}`` for the last ``num_kv_shared_layers`` layers."""
    n = len(kinds)
    shared = r.int("num_kv_shared_layers", default=default, minimum=0)
    if shared == 0:
        return {}
    first = n - shared
    if first <= 0:
        raise r.bad(r.path("num_kv_shared_layers"), shared, f"fewer than {n} layers")
    out: dict[int, int] = {}
    for i in range(first, n):
        sources = [j for j in range(first) if kinds[j] == kinds[i]]
        if not sources:
            raise ConfigError(
                f"{r.source}: layer {i} shares the cache of an earlier {kinds[i]} layer, "
                "but none precedes the shared layers",
                code="config-invalid",
            )
        out[i] = sources[-1]
    prov["kv sharing"] = (
        f"num_kv_shared_layers = {shared}: layers {first}-{n - 1} reuse the cache of the last "
        "earlier layer of their type (no cache of their own)"
    )
    return out
