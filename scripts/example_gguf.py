"""Write the GGUF file of the README's llama.cpp example: Qwen3-8B's shapes in Q4_K_M's types.

    python scripts/example_gguf.py Qwen3-8B-Q4_K_M.gguf

The tensors are Qwen3-8B's (its ``config.json``: 36 layers, 32 query heads and 8 KV heads of 128,
hidden 4,096, FFN 12,288, vocabulary 151,936, untied embeddings) in the types ``llama-quantize``
gives them for Q4_K_M: Q4_K, Q6_K for ``output.weight`` and for ``attn_v``/``ffn_down`` in the
layers its ``use_more_bits`` picks (the first and last eighth and every third between), F32
norms. The keys are the ones kvcalc reads (no tokenizer: llama.cpp could not run this file). The tensor data is not written: the file is extended to its full size with
``truncate``, so it is sparse (about 5 GB long, a few kB on disk) — kvcalc reads only the header.
``scripts/docs.py`` writes it into a temporary folder to generate the README's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

LAYERS, HEADS, KV_HEADS, HEAD_DIM = 36, 32, 8, 128
HIDDEN, FFN, VOCAB, CONTEXT = 4096, 12288, 151_936, 40_960


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp ``src/llama-quant.cpp``: the layers Q4_K_M gives Q6_K ``attn_v``/``ffn_down``."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tensors() -> list[tuple[str, tuple[int, ...], str]]:
    """(name, numpy shape: rows first, the row last, ggml type) in llama.cpp's order."""
    found = [("token_embd.weight", (VOCAB, HIDDEN), "Q4_K")]
    for i in range(LAYERS):
        more = "Q6_K" if use_more_bits(i, LAYERS) else "Q4_K"
        found += [
            (f"blk.{i}.attn_norm.weight", (HIDDEN,), "F32"),
            (f"blk.{i}.attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), "Q4_K"),
            (f"blk.{i}.attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), "Q4_K"),
            (f"blk.{i}.attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), more),
            (f"blk.{i}.attn_q_norm.weight", (HEAD_DIM,), "F32"),
            (f"blk.{i}.attn_k_norm.weight", (HEAD_DIM,), "F32"),
            (f"blk.{i}.attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), "Q4_K"),
            (f"blk.{i}.ffn_norm.weight", (HIDDEN,), "F32"),
            (f"blk.{i}.ffn_gate.weight", (FFN, HIDDEN), "Q4_K"),
            (f"blk.{i}.ffn_up.weight", (FFN, HIDDEN), "Q4_K"),
            (f"blk.{i}.ffn_down.weight", (HIDDEN, FFN), more),
        ]
    return [
        *found,
        ("output_norm.weight", (HIDDEN,), "F32"),
        ("output.weight", (VOCAB, HIDDEN), "Q6_K"),
    ]


def write(path: Path) -> Path:
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quant_shape_to_byte_shape

    writer = GGUFWriter(path, "qwen3")
    writer.add_name("Qwen3-8B")
    writer.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    writer.add_block_count(LAYERS)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    data_bytes = 0
    for name, shape, kind in tensors():
        qtype = GGMLQuantizationType[kind]
        if qtype == GGMLQuantizationType.F32:
            nbytes = int(np.prod(shape)) * 4
            writer.add_tensor_info(name, shape, np.dtype(np.float32), nbytes)
        else:
            byte_shape = quant_shape_to_byte_shape(shape, qtype)
            nbytes = int(np.prod(byte_shape))
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
        data_bytes += -(-nbytes // writer.data_alignment) * writer.data_alignment
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    header = path.stat().st_size
    start = -(-header // writer.data_alignment) * writer.data_alignment
    with path.open("r+b") as file:
        file.truncate(start + data_bytes)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    write(Path(sys.argv[1]))
