"""``page_size`` as SGLang 0.5.23 resolves it from the attention backend it picks (pure).

Hopper and older NVIDIA GPUs: the default backends (fa3, flashinfer, triton) take any page, so a
given ``--page-size`` stands and the default is 1 (``_page_size_default``). DeepSeek sparse
attention takes page 64 whatever is given (``model_overrides/deepseek_v2.py``).

SM 10.x (B200, GB200, B300: SGLang's ``is_sm100``), recorded on an emulated B200 for 20 configs ×
five page sizes (``tests/fixtures/sglang_0_5_23/b200_pages.json``):

- MHA takes ``trtllm_mha`` (``get_default_attn_backend``), and ``_mla_backend_page_constraints``
  turns a page outside 16/32/64/128 (the default included) into 64; MHA with K and V of
  different widths takes fa4, page 128 (``_fa4_page_constraint``; read, not recorded). Under
  speculative decoding only with ``--speculative-eagle-topk 1`` given and no page above 1
  (``is_no_spec_infer_or_topk_one`` reads the top-k before it is resolved): otherwise flashinfer
  (triton without it), which keeps the page, 1 by default (recorded for Llama-3.1-8B and Qwen3-8B
  × EAGLE/EAGLE3/STANDALONE/NGRAM: ``tests/fixtures/sglang_0_5_23/b200_speculative_pages.json``).
- MLA takes ``trtllm_mla`` only for the DeepSeek family SGLang lists
  (``_deepseek_family_overrides``): a page outside 32/64 becomes 64. Other MLA models take
  flashinfer, which keeps the page (default 1: DeepSeek-V2-Lite, 690,420 tokens at 20 GiB).
- DeepSeek sparse attention pages by 64 there too (its KV dtype and record: ``layers``).
- The Qwen3-Next/Qwen3.5 hybrids (``model_overrides/qwen3_5.py``): triton at page 1, whatever page
  is given; ``trtllm_mha`` at page 64 where the Mamba strategy is already ``extra_buffer`` when the
  override runs, the radix cache is off, or speculation is on. ``auto`` is still unresolved then
  (recorded: triton at page 1 though the strategy resolves to ``extra_buffer`` later), so without
  speculation only ``disable_radix_cache`` gives trtllm_mha; with it, trtllm_mha where it is the
  default (the top-k given as 1, no page above 1), else triton at page 1 (recorded for
  Qwen3.5-35B-A3B and Qwen3-Next-80B-A3B: ``tests/fixtures/sglang_0_5_23/b200_qwen3_5.json``).
"""

from __future__ import annotations

from kvcalc.engines.sglang.layers import DEEPSEEK_FAMILY, DSA_PAGE_SIZE, arch_of, is_dsa
from kvcalc.model.shape import ModelShape

#: ``_qwen3_5_hybrid_overrides``' architectures
_QWEN3_5_HYBRIDS = frozenset({
    "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
})  # fmt: skip
_TRTLLM_MHA_PAGES = (16, 32, 64, 128)
_TRTLLM_MLA_PAGES = (32, 64)


def page_size(
    model: ModelShape, capability: tuple[int, int] | None, given: int | None, *, legacy: bool,
    radix_cache: bool, speculative: bool, given_topk: int | None,
) -> int:  # fmt: skip
    """The page SGLang sizes ``model``'s pool with on a GPU of ``capability`` (``given``: the
    ``--page-size`` of the command, None by default; ``legacy``: a 0.4.x profile, page 1;
    ``radix_cache``: not ``--disable-radix-cache``; ``speculative``: a draft is configured;
    ``given_topk``: its ``--speculative-eagle-topk`` as given)."""
    arch = arch_of(model)
    sm100 = capability is not None and capability[0] == 10  # SGLang's is_sm100: major 10
    trtllm_default = not speculative or (given_topk == 1 and given in (None, 1))
    if sm100 and not legacy and arch in _QWEN3_5_HYBRIDS:
        # trtllm_mha at 64 where it is the default and the radix cache is off or a draft is on
        return 64 if trtllm_default and (speculative or not radix_cache) else 1
    if is_dsa(model):
        return DSA_PAGE_SIZE
    if legacy or not sm100:
        return given or 1
    if model.is_mla:
        if arch in DEEPSEEK_FAMILY:
            return given if given in _TRTLLM_MLA_PAGES else 64
        return given or 1
    if not trtllm_default:
        return given or 1  # flashinfer, or triton, keeps the page
    asymmetric = any(
        hasattr(x, "head_dim_v") and x.head_dim_k != x.head_dim_v for x in model.layers
    )
    if asymmetric:
        return 128
    return given if given in _TRTLLM_MHA_PAGES else 64
