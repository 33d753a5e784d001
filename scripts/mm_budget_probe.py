"""mm_budget_probe: vLLM 0.33's multimodal encoder budget for a model, by vLLM's own code (run in the vLLM 0.33.0 venv).

Builds the engine config as `vllm serve` does (vllm_reference's bootstrap: fake CUDA platform), then
`vllm.multimodal.encoder_budget.MultiModalBudget(vllm_config, MULTIMODAL_REGISTRY)` -- the object both GPU model
runners build for `profile_run`: the processor is created from the model folder (`mm_registry.create_processor`),
`get_mm_max_toks_per_item` asks its processing info (or runs the dummy inputs through the HF processor),
`compute_mm_encoder_budget` gives the compute budget and cache size, `_get_max_items` the items per prompt and per
batch. The model folder needs config.json, a preprocessor_config.json (video_preprocessor_config.json) and a
tokenizer: `--stub-tokenizer JSON` writes a WordLevel tokenizer holding only the model's special tokens at their
config ids (the processors look them up; no text is tokenized for the budget).

Usage: VLLM_REFERENCE=HARNESS_DIR mm_budget_probe.py MODEL_DIR GPU SCENARIOS_JSON [--stub-tokenizer SPECIALS_JSON [EXTRA_SPECIAL_TOKENS_JSON]]
  SCENARIOS_JSON: a list of EngineArgs dicts (max_model_len, max_num_batched_tokens, max_num_seqs,
  limit_mm_per_prompt ...). One JSON list on stdout. Run with HF_HUB_OFFLINE=1 VLLM_HAS_FLASHINFER_CUBIN=1.
"""

import json
import os
import sys

# the vLLM reference harness's folder (vllm_reference.py: its fake CUDA platform bootstrap)
sys.path.insert(0, os.environ["VLLM_REFERENCE"])
import vllm_reference as vr  # noqa: E402


def stub_tokenizer(folder: str, specials: dict, extra: dict) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[BOS]": 1, "[EOS]": 2, **specials}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(list(specials))
    tok.save(os.path.join(folder, "tokenizer.json"))
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "[UNK]",
        "bos_token": "[BOS]",
        "eos_token": "[EOS]",
        "model_max_length": 10**9,
    }
    if extra:
        cfg["extra_special_tokens"] = extra
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)


def main() -> None:
    folder, gpu, scenarios = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if len(sys.argv) > 4 and sys.argv[4] == "--stub-tokenizer":
        stub_tokenizer(
            folder, json.loads(sys.argv[5]), json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
        )
    vr._bootstrap(gpu)
    from vllm.engine.arg_utils import EngineArgs
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.encoder_budget import MultiModalBudget
    from vllm.usage.usage_lib import UsageContext

    out = []
    for extra in scenarios:
        kw = dict(model=folder, load_format="dummy", **extra)
        row: dict = {"engine_args": extra}
        try:
            vc = EngineArgs(**kw).create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
            sc = vc.scheduler_config
            b = MultiModalBudget(vc, MULTIMODAL_REGISTRY)
            row.update(
                {
                    "status": "ok",
                    "max_model_len": vc.model_config.max_model_len,
                    "max_num_batched_tokens": sc.max_num_batched_tokens,
                    "max_num_seqs": sc.max_num_seqs,
                    "mm_limits": dict(b.mm_limits),
                    "mm_max_tokens_per_item": dict(b.mm_max_toks_per_item),
                    "encoder_compute_budget": b.encoder_compute_budget,
                    "encoder_cache_size": b.encoder_cache_size,
                    "encoder_budget": b.get_encoder_budget(),
                    "mm_max_items_per_prompt": dict(b.mm_max_items_per_prompt),
                    "mm_max_items_per_batch": dict(b.mm_max_items_per_batch),
                    "profiled_modality": b.get_modality_with_max_tokens()
                    if b.mm_max_toks_per_item
                    else None,
                }
            )
        except Exception as exc:  # the refusal is a result too
            row.update(
                {
                    "status": "error",
                    "error": f"{type(exc).__name__}: {vr._scrub(str(exc), folder)}"[:400],
                }
            )
        out.append(row)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
