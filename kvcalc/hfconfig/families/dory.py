"""Dory (``DoryForCausalLM``, ``dory``): vLLM 0.33 ``models/dory.py`` over vLLM's own
``DoryConfig`` (``transformers_utils/configs/dory.py``), a normalised latent-recurrent model.

Each physical layer is attention-only or MLP-only (``layer_types``: ``sliding_attention``,
``full_attention`` or ``mlp``; the config class writes every odd layer ``mlp``, layer ``i % 8 == 6``
full and the rest sliding). An attention layer caches ``num_key_value_heads`` KV heads ``head_dim``
wide (sliding ones over ``sliding_window``); an ``mlp`` layer caches nothing. The
``n_recurrent_layers`` middle layers run ``n_recurrent_loops`` times: with
``recurrent_kv_cache_mode`` ``per_loop`` each loop keeps its own cache of them (virtual layers
``loop · num_hidden_layers + i``, laid out after the physical ones); ``last_loop`` reuses one
cache. vLLM builds it at TP 1 only (``ValueError``, recorded). Weights are not counted from
config.json.
"""

from __future__ import annotations

from kvcalc.errors import ConfigError
from kvcalc.hfconfig import layers as L
from kvcalc.hfconfig.families._windowed import typed_layer
from kvcalc.hfconfig.family import Family, LayoutContext
from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.layouts import Layout, NoCache

_TYPES = ("sliding_attention", "full_attention", "mlp")


def read_dory(r: ConfigReader, ctx: LayoutContext) -> tuple[list[Layout], tuple[str, ...]]:
    n, prov = ctx.num_layers, ctx.provenance
    types = r.list("layer_types")
    note = "layer_types"
    if types is None:
        types = ["mlp" if i % 2 else "full_attention" if i % 8 == 6 else "sliding_attention"
                 for i in range(n)]  # fmt: skip
        note = "DoryConfig's layer_types (odd layers mlp, i % 8 == 6 full, the rest sliding)"
    unknown = sorted({str(t)[:40] for t in types if t not in _TYPES})
    if len(types) != n or unknown:
        raise ConfigError(
            f"{r.source}: layer_types must name {n} layers as sliding_attention, full_attention "
            "or mlp (DoryConfig refuses it: ValueError)",
            code="config-invalid",
        )
    loops = r.int("n_recurrent_loops", default=1)
    mode = r.str("recurrent_kv_cache_mode", "per_loop")
    if mode not in ("per_loop", "last_loop"):
        raise r.bad(r.path("recurrent_kv_cache_mode"), mode, "per_loop or last_loop")
    n_in = r.int("n_input_layers", default=0, minimum=0)
    n_out = r.int("n_output_layers", default=0, minimum=0)
    n_rec = r.int("n_recurrent_layers", default=n - n_in - n_out, minimum=0)
    if n_in + n_rec + n_out != n:
        raise ConfigError(
            f"{r.source}: n_input_layers + n_recurrent_layers + n_output_layers = "
            f"{n_in} + {n_rec} + {n_out} is not num_hidden_layers {n} (DoryConfig refuses it)",
            code="config-invalid",
        )
    extra_loops = loops - 1 if mode == "per_loop" else 0
    width = r.int("head_dim", default=256)
    kv = r.int("num_key_value_heads", default=4)
    window = r.int("sliding_window", default=1024) if "sliding_attention" in types else None
    prov["head_dim"] = f"head_dim = {width} (DoryConfig's default 256)"
    prov["num_kv_heads"] = f"num_key_value_heads = {kv} on every attention layer"
    prov["layer pattern"] = (
        f"{note}: sliding_attention → a {window}-token window, full_attention → full, mlp → no "
        f"cache; {loops} recurrent loop(s), recurrent_kv_cache_mode {mode}: "
        + (
            f"layers {n_in} to {n_in + n_rec - 1} keep a cache per loop (dory.py's virtual layers "
            "loop · num_hidden_layers + i)"
            if extra_loops
            else "one cache per layer"
        )
    )
    ctx.tp_limit[1] = (
        "Dory currently supports tensor_parallel_size=1 only (vLLM 0.33 dory.py)",
        "invalid-parallelism",
    )
    layouts: list[Layout] = []
    for t in types:
        if t == "mlp":
            layouts.append(NoCache(dtype=ctx.dtype))
        else:
            layouts.append(typed_layer(t, window, dtype=ctx.dtype, kv_heads=kv, head_dim=width))
    # each further loop's caches of the recurrent attention layers, after the physical layers (the
    # order of their layer names)
    for _ in range(extra_loops):
        layouts.extend(x for i, x in enumerate(layouts[:n])
                       if n_in <= i < n_in + n_rec and not isinstance(x, NoCache))  # fmt: skip
    return layouts, (L.UNCOUNTED,) * len(layouts)


FAMILIES = (
    Family(
        name="dory",
        model_types={"dory"},
        architectures={"DoryForCausalLM"},
        keys={
            "layer_types",
            "sliding_window",
            "n_recurrent_loops",
            "recurrent_kv_cache_mode",
            "n_input_layers",
            "n_recurrent_layers",  # the middle layers the loops run (one cache each, last_loop)
            "n_output_layers",
            "ngpt_alpha_init",  # nGPT residual scales: not cache
            "attention_output_gate_logit_scale_init",  # the output gate: not cache
        },
        layer_types=set(_TYPES),
        layouts=read_dory,
        own_layer_count=True,
        note="Dory: attention-only and MLP-only layers per layer_types, num_key_value_heads of "
        "head_dim, TP 1 only (vLLM 0.33 dory.py).",
    ),
)
