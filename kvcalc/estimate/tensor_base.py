"""The tensor record and the linear/MLP builders every inventory module shares (a leaf of
:mod:`kvcalc.estimate`: :mod:`~kvcalc.estimate.tensors`, ``vision_tensors``, ``dsv4_tensors``)."""

from __future__ import annotations

from kvcalc.frozen import frozen
from kvcalc.hfconfig.weight_shape import MlpWeights
from kvcalc.units import cdiv


@frozen
class Tensor:
    name: str
    rows: int
    cols: int = 1
    #: linear, embedding, lm_head, position, norm, bias, router, conv, vector
    role: str
    layer: int | None = None
    #: stacked copies (routed experts); ``rows × cols`` is one copy
    copies: int = 1
    expert: bool = False
    vision: bool = False
    split: str = "replicated"
    #: heads stacked along rows (``kv`` split only)
    heads: int = 1
    #: stored in fp32 whatever the model's dtype (a parameter the engine's module creates with
    #: ``dtype=torch.float32``), never quantized
    fp32: bool = False
    #: the fewest rows (column split) or columns (row split) vLLM allocates a rank when TP splits
    #: the tensor (Kimi-Linear's experts: ``min_moe_intermediate_per_partition``); 0: no floor
    min_per_rank: int = 0
    #: a Mamba2 projection's groups and each group's rows (B and C: 2 × state): vLLM's
    #: ``MambaMixer2`` replicates the groups up to the TP size when TP does not divide them
    #: (``extra_groups_for_head_shards``), one group's rows on every rank; 0: no groups
    groups: int = 0
    group_rows: int = 0
    #: a tensor vLLM allocates that the checkpoint and transformers do not have (Gemma 4's V slot
    #: in a k_eq_v layer's qkv_proj, loaded with K): priced on the GPU, not a parameter
    engine_only: bool = False
    #: split over TP only where TP divides this count, else whole on every rank (Qwen3-ASR's audio
    #: layers: ``disable_tp`` where TP does not divide the heads); 0: always split
    split_if_divides: int = 0

    @property
    def numel(self) -> int:
        return self.rows * self.cols * self.copies

    def shape_per_rank(self, tp: int) -> tuple[int, int]:
        """``(rows, cols)`` of one copy on one tensor-parallel rank."""
        if self.split_if_divides and self.split_if_divides % tp:
            return self.rows, self.cols
        if self.split == "column" or self.split == "vocab":
            return cdiv(self.rows, tp), self.cols
        if self.split == "row":
            return self.rows, cdiv(self.cols, tp)
        if self.split == "kv":
            return self.rows // self.heads * max(1, self.heads // tp), self.cols
        return self.rows, self.cols


def _linear(name: str, rows: int, cols: int, layer: int | None, split: str, *, bias: bool = False,
            heads: int = 1, role: str = "linear") -> list[Tensor]:  # fmt: skip
    out = [
        Tensor(name=name, rows=rows, cols=cols, role=role, layer=layer, split=split, heads=heads)
    ]
    if bias:  # a column-parallel bias is split with its rows; a row-parallel one is replicated
        out.append(Tensor(name=f"{name}.bias", rows=rows, role="bias", layer=layer,
                          split="replicated" if split == "row" else split, heads=heads))  # fmt: skip
    return out


def _mlp(m: MlpWeights, h: int, p: str, i: int | None) -> list[Tensor]:
    """gate_proj and up_proj (checkpoints store them apart; vLLM keeps one scale each) + down_proj."""
    inter = m.intermediate_size
    out = _linear(f"{p}.gate_proj", inter, h, i, "column", bias=m.bias) if m.gated else []
    out += _linear(f"{p}.up_proj", inter, h, i, "column", bias=m.bias)
    return out + _linear(f"{p}.down_proj", h, inter, i, "row", bias=m.bias)
