"""How a mixture-of-experts config routes tokens (DeepSeek-style keys): the scoring function, top-k
normalisation and scaling, group-limited routing and a selection bias. Only the shape of the router's
computation, which llama.cpp's graph follows; no weight is counted from it."""

from __future__ import annotations

from enum import Enum

from kvcalc.frozen import frozen
from kvcalc.hfconfig.reader import ConfigReader


class RouterScoring(Enum):
    SOFTMAX = "softmax"
    SIGMOID = "sigmoid"


@frozen
class MoeRouter:
    scoring: RouterScoring = RouterScoring.SOFTMAX
    #: ``norm_topk_prob``: the chosen experts' weights renormalised to sum to one
    norm_topk_prob: bool = False
    routed_scaling_factor: float = 1.0
    #: ``n_group``/``topk_group``: experts in groups, the best ``topk_group`` groups kept
    n_group: int = 1
    topk_group: int = 1
    #: ``topk_method`` ``noaux_tc``: a per-expert selection bias (``e_score_correction_bias``)
    selection_bias: bool = False


def read_router(r: ConfigReader) -> MoeRouter:
    """The router keys as DeepSeek's configs spell them; absent ones take DeepSeek-V2's meaning."""
    scoring = r.str("scoring_func", "softmax")
    if scoring not in {x.value for x in RouterScoring}:
        raise r.bad(r.path("scoring_func"), scoring, "softmax or sigmoid")
    scale = r.value("routed_scaling_factor", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
        raise r.bad(r.path("routed_scaling_factor"), scale, "a positive number")
    return MoeRouter(scoring=RouterScoring(scoring), norm_topk_prob=r.bool("norm_topk_prob"),
                     routed_scaling_factor=float(scale), n_group=r.int("n_group", default=1),
                     topk_group=r.int("topk_group", default=1),
                     selection_bias=r.str("topk_method", "") == "noaux_tc")  # fmt: skip
