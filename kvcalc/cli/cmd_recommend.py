"""``kvcalc recommend``: the cheapest deployment that meets a workload, each row a plan."""

from __future__ import annotations

from typing import Annotated, Any

from kvcalc.cli.app import app
from kvcalc.cli.options import MODEL_SOURCE, OptionalModelArgument, command, opt, use
from kvcalc.planning.settings import HARDWARE_PANEL, OUTPUT_PANEL, WORKLOAD_PANEL

#: the searched settings: given, each fixes its value; left out, it is searched
_SEARCHED = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
             "decode_context_parallel_size")  # fmt: skip
_MULTI = ("gpu", "engine", "kv_cache_dtype", "quantization")
SEARCH_PANEL = "Search"


@command(
    app,
    use("gpu", multi=True, note="The GPUs to search (default: the whole catalog)."),
    *(use(n, default=None, note="Given, it is fixed; else searched.") for n in _SEARCHED),
    use("enable_expert_parallel", note="Given, it is fixed on; else searched for MoE models."),
    use("engine", multi=True, note="The engines to search (default: vllm)."),
    "engine_version", "max_model_len", "max_num_seqs",
    use("kv_cache_dtype", multi=True, note="The KV dtypes to search (default: auto, and the "
        "engine's fp8 where the GPU has fp8)."),
    "dtype",
    use("quantization", multi=True, note="Searched only when given (it changes the outputs)."),
    "gpu_memory_utilization", "block_size", "max_num_batched_tokens", "enforce_eager",
    "enable_prefix_caching", "trust_layout", "from_command", "ignore_unmodelled",
    "prompt_len", "output_len", "shared_prefix", *MODEL_SOURCE, "json",
    examples=(
        "kvcalc recommend llama-3.1-8b --max-model-len 32K --concurrency 64",
        "kvcalc recommend deepseek-v3 --max-model-len 32768 --concurrency 64 --gpu H200 --gpu B200",
    ),
)  # fmt: skip
def recommend(
    model: OptionalModelArgument = None,
    *,
    concurrency: Annotated[
        int,
        opt(
            "--concurrency",
            help="Concurrent requests the whole deployment must run (at "
            "--max-model-len, or at the workload --prompt-len/--output-len).",
            panel=WORKLOAD_PANEL,
            min=1,
            max=1 << 40,
            metavar="N",
        ),
    ],
    min_headroom: Annotated[
        float,
        opt(
            "--min-headroom",
            help="Least KV headroom beyond the requests, a fraction of the pool (0.1 = 10%).",
            panel=WORKLOAD_PANEL,
            min=0.0,
            max=0.99,
            metavar="FRACTION",
        ),
    ] = 0.0,
    min_decode_tokens_per_s: Annotated[
        float | None,
        opt(
            "--min-decode-tokens-per-s",
            help="Least decode ceiling over the "
            "deployment (the roofline: an upper bound), tokens/s.",
            panel=WORKLOAD_PANEL,
            min=0.0,
            metavar="TOKENS",
        ),
    ] = None,
    max_gpus: Annotated[
        int | None,
        opt(
            "--max-gpus",
            help="Most GPUs a deployment may use.",
            panel=HARDWARE_PANEL,
            min=1,
            max=1 << 20,
            metavar="N",
        ),
    ] = None,
    nodes: Annotated[
        int,
        opt(
            "--nodes",
            help="Nodes of 8 GPUs to search up to (counts 1, 2, 4, 8 per node, then 16, 24, ...).",
            panel=HARDWARE_PANEL,
            min=1,
            max=64,
            metavar="N",
            show_default=True,
        ),
    ] = 1,
    objective: Annotated[
        str,
        opt(
            "--objective",
            help="Rank by cost (price per hour), gpus (count) or "
            "tokens-per-dollar (decode ceiling per dollar).",
            panel=SEARCH_PANEL,
            show_default=True,
            metavar="cost|gpus|tokens-per-dollar",
        ),
    ] = "cost",
    prices: Annotated[
        str | None,
        opt(
            "--prices",
            help="Prices per GPU-hour: YAML, or CSV with the header "
            "gpu,usd_per_hour (default: $KVCALC_PRICES, else the bundled table).",
            panel=SEARCH_PANEL,
            metavar="FILE",
        ),
    ] = None,
    top: Annotated[
        int,
        opt(
            "--top",
            help="Rows to show.",
            panel=OUTPUT_PANEL,
            min=1,
            max=100,
            show_default=True,
            metavar="N",
        ),
    ] = 5,
    explain: Annotated[
        bool,
        opt(
            "--explain",
            help="Say why the configurations ranked before the best were rejected.",
            panel=OUTPUT_PANEL,
        ),
    ] = False,
    disaggregated: Annotated[
        bool,
        opt(
            "--disaggregated",
            help="Prefill/decode disaggregation: a decode pool for the workload (whole "
            "prompts resident) and a prefill pool (one request at --max-model-len), each "
            "searched, and how many prefill deployments one decode deployment needs (needs "
            "--prompt-len and --output-len).",
            panel=SEARCH_PANEL,
        ),
    ] = False,
    given: dict[str, Any],
) -> int:
    """Recommend the cheapest deployment that meets a workload: GPUs, count, parallelism, KV
    dtype and engine, each row a plan with the commands that reproduce it.

    Exit status: 0 a deployment was found (with --disaggregated: for both pools); 1 none
    searched meets the requirements; 2 bad input.
    """
    from kvcalc.cli.options import with_gguf_file
    from kvcalc.cli.plan_args import recommend_request
    from kvcalc.planning.api import recommend_reference

    request, search = recommend_request(
        given, model, nodes=nodes, max_gpus=max_gpus, objective=objective, top=top,
        disaggregated=disaggregated,
    )  # fmt: skip
    from kvcalc.planning.recommend_result import Requirements

    asked = Requirements(concurrency=concurrency, min_headroom=min_headroom,
                         min_decode_tokens_per_s=min_decode_tokens_per_s)  # fmt: skip
    reference = with_gguf_file(request.reference, given["gguf_file"])
    token, offline = given["token"], given["offline"] or None
    if disaggregated:
        from kvcalc.planning.api import disaggregated_reference

        pools = disaggregated_reference(reference, request.inputs, asked, search, prices=prices,
                                        revision=request.revision, token=token,
                                        offline=offline)  # fmt: skip
        if given["json"]:
            from kvcalc.render import to_json

            to_json.print_json(pools.to_dict())
        else:
            from kvcalc.render import recommend_view

            recommend_view.render_pools(pools, explain=explain)
        return 0 if pools.decode.candidates and pools.prefill.candidates else 1
    result = recommend_reference(reference, request.inputs, asked, search, prices=prices,
                                 revision=request.revision, token=token, offline=offline)  # fmt: skip
    if given["json"]:
        from kvcalc.render import to_json

        to_json.print_json(result.to_dict())
    else:
        from kvcalc.render import recommend_view

        recommend_view.render(result, explain=explain)
    return 0 if result.candidates else 1
