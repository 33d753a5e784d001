"""What ``verify --run`` writes as a llama.cpp GGUF: the architecture and the numbers that matter
(:class:`GgufSpec`), and the widths that only size weights (:class:`GgufWidths`). Pure data."""

from __future__ import annotations

from kvcalc.errors import KvcalcError
from kvcalc.frozen import frozen
from kvcalc.hfconfig.moe_router import MoeRouter
from kvcalc.model.layouts import MLALatent, RecurrentState
from kvcalc.model.recurrent_layouts import Mamba2State
from kvcalc.model.shape import ModelShape

HIDDEN = 64
FFN = 64
EXPERT_FFN = 32
VOCAB = 384
#: tensors larger than this are written as zeros, as a hole in a sparse file (the model's own
#: expert widths run to gigabytes a layer; llama.cpp maps them, and they size no KV or compute)
SPARSE_BYTES = 8 << 20


@frozen
class GgufWidths:
    """The widths that size only weights and the compute graph, not the KV cache."""

    hidden: int = HIDDEN
    ffn: int = FFN
    vocab: int = VOCAB
    #: one routed expert's MLP width, and the shared experts' (0: the architecture's default)
    expert_ffn: int = EXPERT_FFN
    shared_ffn: int = 0


def model_widths(model: ModelShape, *, vocab: int = VOCAB) -> GgufWidths:
    """The model's own embedding and MLP widths (its experts' too), with a small vocabulary."""
    w = model.weights
    moe, mlp = getattr(w, "moe", None), getattr(w, "mlp", None)
    ffn = mlp.intermediate_size if mlp is not None else getattr(w, "intermediate_size", 0) or FFN
    return GgufWidths(hidden=w.hidden_size, ffn=ffn, vocab=vocab,
                      expert_ffn=moe.expert_intermediate_size if moe else EXPERT_FFN,
                      shared_ffn=moe.shared_intermediate_size if moe else 0)  # fmt: skip


@frozen
class GgufSpec:
    arch: str
    num_layers: int
    heads: int
    kv_heads: int
    head_k: int
    head_v: int
    context_length: int
    sliding: tuple[bool, ...] | None = None
    window: int = 0
    experts: int = 0
    experts_used: int = 0
    hidden: int = HIDDEN
    ffn: int = FFN
    vocab: int = VOCAB
    expert_ffn: int = EXPERT_FFN
    shared_ffn: int = 0
    #: ``deepseek2``: the leading layers with a dense FFN (the rest have experts), the router, the
    #: Q LoRA rank (0: one ``attn_q``)
    dense_lead: int = 0
    router: MoeRouter = MoeRouter()
    q_lora: int = 0
    #: KV heads per layer where they differ (written as an array, as llama.cpp reads it)
    kv_heads_per_layer: tuple[int, ...] | None = None
    #: Mamba-2 (``mamba2``): the state's shape
    ssm: Mamba2State | None = None
    #: MLA (``deepseek2``): the latent's shape
    mla: MLALatent | None = None
    #: a hybrid's layers, ``attn``/``recr``/``both``/``mlp``, and its recurrent mixer
    #: (:mod:`.llamacpp_hybrid_gguf`)
    roles: tuple[str, ...] | None = None
    state: RecurrentState | None = None


def unsupported(model: ModelShape, why: str) -> KvcalcError:
    return KvcalcError(f"verify --run cannot write {model.name} as a llama.cpp model: {why}",
                       hint="run the layout check instead (without --run)",
                       code="run-unsupported-model")  # fmt: skip
