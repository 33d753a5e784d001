"""Replay vLLM 0.8.3's V0 profile-run forward of Qwen2.5-VL on the meta device and measure its
peak live bytes on one TP rank (a stand-in for ``torch.cuda.max_memory_allocated``).

Run from the repo root (needs torch): ``python bench/vl_profile_replay.py [--write]``; ``--write``
records the results in ``tests/fixtures/vl_profile_replay.json``, against which
``tests/test_encoder_profile.py`` checks :mod:`kvcalc.estimate.encoder_profile`.

The forward is the allocation sequence of 0.8.3's code, op for op (``model_executor/models/
qwen2_5_vl.py``: ``Qwen2_5_VLForConditionalGeneration.forward`` V0 path,
``_parse_and_validate_image_input``, ``_process_image_input``, ``Qwen2_5_VisionTransformer.forward``,
``Qwen2_5_VisionBlock``, ``Qwen2_5_VisionAttention`` with ``split_qkv``,
``Qwen2_5_VisionMLP``, ``Qwen2_5_VisionPatchMerger``; ``qwen2_vl.py``
``apply_rotary_pos_emb_vision`` / ``apply_rotary_emb_torch``; ``qwen2.py`` ``Qwen2DecoderLayer``,
``Qwen2Attention``, ``Qwen2MLP``; ``rotary_embedding.py`` ``MRotaryEmbedding.forward``;
``distributed`` ``all_gather`` and pynccl ``all_reduce``; vLLM's ``RMSNorm`` (``empty_like``),
``fused_add_rms_norm`` and ``silu_and_mul`` (in place / one output)). Attention kernels (xFormers
or flash-attn varlen) are their output tensor. A module call keeps its arguments until it returns
(``nn.Module._call_impl``), which the functions below mirror by never rebinding a parameter.
Weights are made outside the counter: the profile's increase excludes them.
"""

from __future__ import annotations

import argparse
import json
import sys
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "vl_profile_replay.json"
D, BF = "meta", torch.bfloat16


class LiveBytes(TorchDispatchMode):
    """Bytes of the storages created inside the mode that are still alive, and their peak;
    ``block_bytes``: each storage counted rounded up to a multiple of it (the CUDA caching
    allocator's 512 B blocks, as ``torch.cuda.max_memory_allocated`` counts them)."""

    def __init__(self, block_bytes: int = 1) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.block = block_bytes
        self.seen: set[int] = set()

    def _free(self, key: int, n: int) -> None:
        self.live -= n
        self.seen.discard(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {id(a.untyped_storage()) for a in tree_flatten((args, kwargs))[0]
                  if isinstance(a, torch.Tensor)}  # fmt: skip
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            s = t.untyped_storage()
            key = id(s)
            if key in self.seen or key in inputs or s.nbytes() == 0:
                continue  # already counted, or a view of / write into a tensor made outside
            self.seen.add(key)
            n = -(-s.nbytes() // self.block) * self.block
            self.live += n
            weakref.finalize(s, self._free, key, n)
            self.peak = max(self.peak, self.live)
        return out


def W(*shape):
    return torch.empty(*shape, dtype=BF, device=D)


def all_gather(x, tp):
    size, dim = x.size(), x.dim() - 1
    out = torch.empty((size[0] * tp,) + size[1:], dtype=x.dtype, device=D)
    out = out.reshape((tp,) + size).movedim(0, dim)
    return out.reshape(size[:dim] + (tp * size[dim],) + size[dim + 1 :])


def all_reduce(x, tp):
    return torch.empty_like(x) if tp > 1 else x  # pynccl: out = empty_like(in)


def rms_norm(x):
    return torch.empty_like(x)


def rotary_torch(t, freqs):
    t_ = t.float()
    cos, sin = freqs.cos(), freqs.sin()
    ro = cos.shape[-1] * 2
    cos = cos.unsqueeze(-2).repeat(1, 1, 2).reshape(cos.shape[0], 1, ro)  # "... d -> ... 1 (2 d)"
    sin = sin.unsqueeze(-2).repeat(1, 1, 2).reshape(sin.shape[0], 1, ro)
    x = t_[..., :ro]
    x1, x2 = x.chunk(2, dim=-1)
    rot = torch.cat((-x2, x1), dim=-1)
    out = torch.cat([x * cos + rot * sin, t_[..., ro:]], dim=-1)
    return out.type_as(t)


class Tower:
    def __init__(self, c):
        self.c, hv, tp, i = c, c["hv"], c["tp"], c["inter"] // c["tp"]
        self.blocks = [dict(qkv=W(3 * hv // tp, hv), qkv_b=W(3 * hv // tp), proj=W(hv, hv // tp),
                            g=W(i, hv), g_b=W(i), u=W(i, hv), u_b=W(i), d=W(hv, i))
                       for _ in range(c["depth"])]  # fmt: skip
        self.conv = W(hv, 3, 2, 14, 14)
        unit = 4
        self.fc1, self.fc1_b = W(hv * unit // tp, hv * unit), W(hv * unit // tp)
        self.fc2 = W(c["out"], hv * unit // tp)

    def attn(self, b, x_in, rope):
        c, tp = self.c, self.c["tp"]
        x = F.linear(x_in, b["qkv"], b["qkv_b"])
        seq, bs, _ = x.shape
        qkv = all_gather(x, tp) if tp > 1 else x
        q, k, v = qkv.chunk(3, dim=2)
        if tp > 1:
            q, k, v = (torch.chunk(t, tp, dim=-1)[0] for t in (q, k, v))
        hp, hd = c["heads"] // tp, c["hv"] // c["heads"]
        q, k, v = (t.view(seq, bs, hp, hd) for t in (q, k, v))
        del qkv
        q, k, v = (t.permute(1, 0, 2, 3).contiguous() for t in (q, k, v))  # s b -> b s
        q = rotary_torch(q, rope)
        k = rotary_torch(k, rope)
        q, k, v = (t.reshape(-1, hp, hd) for t in (q, k, v))
        out = torch.empty_like(q)  # xFormers / flash-attn varlen: the output
        ctx = out.reshape(bs, seq, hp, hd)
        del out, q, k, v
        ctx = ctx.permute(1, 0, 2, 3).reshape(seq, bs, hp * hd).contiguous()
        return self.row(ctx, b["proj"])

    def row(self, inp, w):
        return all_reduce(F.linear(inp, w), self.c["tp"])

    def mlp(self, b, x_in):
        g = F.silu(F.linear(x_in, b["g"], b["g_b"]))
        u = F.linear(x_in, b["u"], b["u_b"])
        return self.row(g * u, b["d"])

    def block(self, b, x_in, rope):
        a = self.attn(b, rms_norm(x_in), rope)
        x = x_in + a
        del a
        return x + self.mlp(b, rms_norm(x))

    def merger(self, x_in):
        x = rms_norm(x_in).view(-1, self.c["hv"] * 4)
        x = F.gelu(F.linear(x, self.fc1, self.fc1_b))
        return all_reduce(F.linear(x, self.fc2), self.c["tp"])

    def forward(self, x_in, grid):
        c = self.c
        s, hv, hd = x_in.shape[0], c["hv"], c["hv"] // c["heads"]
        x = x_in.view(s, 3, 2, 14, 14)
        h = F.conv3d(x, self.conv, stride=(2, 14, 14)).view(s, hv)
        del x
        self.freqs = torch.empty(2 * grid, hd // 4, dtype=torch.float32, device=D)  # kept
        pos = torch.zeros(s, 2, dtype=torch.long, device=D)
        rope = self.freqs[pos].flatten(1)
        del pos
        widx = torch.zeros(s // 4, dtype=torch.long, device=D)
        h = h.reshape(s // 4, 4, -1)[widx].reshape(s, -1)
        rope = rope.reshape(s // 4, 4, -1)[widx].reshape(s, -1)
        h = h.unsqueeze(1)
        for b in self.blocks:
            h = self.block(b, h, rope)
        h = self.merger(h)
        rev = torch.zeros(h.shape[0], dtype=torch.long, device=D)
        return h[rev]


class Text:
    def __init__(self, c):
        self.c, tp, h = c, c["tp"], c["text_h"]
        qh, kvh, hd = c["q_heads"] // tp, max(1, c["kv_heads"] // tp), 128
        self.dims = qh, kvh, hd
        i = c["text_i"] // tp
        self.embed = W(c["vocab"] // tp, h)
        self.cache = W(128000, hd)
        self.layers = [dict(qkv=W((qh + 2 * kvh) * hd, h), qkv_b=W((qh + 2 * kvh) * hd),
                            o=W(h, qh * hd), gu=W(2 * i, h), d=W(h, i))
                       for _ in range(c["text_layers"])]  # fmt: skip

    def embed_tokens(self, ids):
        tp = self.c["tp"]
        if tp == 1:
            return F.embedding(ids, self.embed)
        mask = (ids >= 0) & (ids < 10)
        out = F.embedding(mask * ids, self.embed)
        out.masked_fill_(mask.unsqueeze(-1), 0)
        return all_reduce(out, tp)

    def self_attn(self, L, positions, h_in):
        qh, kvh, hd = self.dims
        T = h_in.shape[0]
        qkv = F.linear(h_in, L["qkv"], L["qkv_b"])
        q, k, v = qkv.split([qh * hd, kvh * hd, kvh * hd], dim=-1)
        cos, sin = self.cache[positions].chunk(2, dim=-1)
        cos = torch.cat([t[j] for j, t in enumerate(cos.split([16, 24, 24], dim=-1))], dim=-1)
        sin = torch.cat([t[j] for j, t in enumerate(sin.split([16, 24, 24], dim=-1))], dim=-1)

        def rot(t, n, cos, sin):
            t = t.reshape(T, n, hd)
            c_, s_ = cos.unsqueeze(-2).to(t.dtype), sin.unsqueeze(-2).to(t.dtype)
            x1, x2 = torch.chunk(t, 2, dim=-1)
            o = torch.cat((x1 * c_ - x2 * s_, x2 * c_ + x1 * s_), dim=-1)
            return torch.cat((o, t[..., hd:]), dim=-1).reshape(T, n * hd)

        q, k = rot(q, qh, cos, sin), rot(k, kvh, cos, sin)
        del cos, sin
        out = torch.empty_like(q)
        del q, k, v, qkv
        return all_reduce(F.linear(out, L["o"]), self.c["tp"])

    def mlp(self, L, x_in):
        gate_up = F.linear(x_in, L["gu"])
        x = torch.empty(x_in.shape[0], gate_up.shape[-1] // 2, dtype=BF, device=D)  # silu_and_mul
        return all_reduce(F.linear(x, L["d"]), self.c["tp"])

    def layer(self, L, positions, hs, residual):
        if residual is None:
            residual, h = hs, rms_norm(hs)
        else:
            h = hs  # fused_add_rms_norm, in place
        a = self.self_attn(L, positions, h)
        del h
        return self.mlp(L, a), residual  # post-attention norm fused, in place

    def forward(self, positions, embeds):
        x, residual = embeds, None
        for L in self.layers:
            x, residual = self.layer(L, positions, x, residual)
        return x


def profile(c):
    """One forward of the V0 profile run with one sequence holding ``c['images']`` images."""
    tower, text, m = Tower(c), Text(c), LiveBytes()
    s = c["images"] * c["grid"] ** 2
    T = s // 4
    with m:
        ids = torch.zeros(T, dtype=torch.long, device=D)
        positions = torch.zeros(3, T, dtype=torch.long, device=D)
        kwargs = {"pixel_values": torch.empty(1, s, 1176, dtype=torch.float32, device=D)}
        tower_peak = _forward(tower, text, m, ids, positions, c, **kwargs)
    return tower_peak, m.peak


def _forward(tower, text, m, ids, positions, c, **kwargs):
    batched = kwargs.pop("pixel_values")
    pixels = torch.concat(list(batched))  # _validate_and_reshape_mm_tensor
    embeds = text.embed_tokens(ids)  # get_input_embeddings_v0: the prompt first
    pixel_bf16 = pixels.type(BF)  # _process_image_input
    image = tower.forward(pixel_bf16, c["grid"])
    del pixel_bf16
    embeds[ids == 151655] = torch.cat((image,))  # merge_multimodal_embeddings (_flatten: cat)
    del image
    tower_peak = m.peak
    m.peak = m.live  # from here: the text forward's peak
    text.forward(positions, embeds)
    return tower_peak


CONFIGS = {
    "Qwen--Qwen2.5-VL-72B-Instruct": dict(hv=1280, inter=3456, heads=16, depth=32, out=8192,
                                          text_h=8192, text_i=29568, q_heads=64, kv_heads=8,
                                          vocab=152064),
    "Qwen--Qwen2.5-VL-7B-Instruct": dict(hv=1280, inter=3420, heads=16, depth=32, out=3584,
                                         text_h=3584, text_i=18944, q_heads=28, kv_heads=4,
                                         vocab=152064),
}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    cases = []
    for name, dims in CONFIGS.items():
        for tp in (1, 2, 4):
            # 3,584² image (256 × 256 patches), one per prompt, no video; three text layers (the
            # layers after the first repeat the same moment)
            c = dict(dims, tp=tp, grid=256, images=1, text_layers=3)
            tower, text = profile(c)
            cases.append({"config": name, "tensor_parallel_size": tp, "images": 1, "videos": 0,
                          "patches": c["grid"] ** 2, "tower_peak_bytes": tower,
                          "text_peak_bytes": text})  # fmt: skip
            print(f"{name} TP {tp}: tower {tower / 2**30:.3f} GiB, text {text / 2**30:.3f} GiB")
    if args.write:
        OUT.write_text(json.dumps({
            "source": "bench/vl_profile_replay.py: vLLM 0.8.3's V0 profile-run forward of "
            "Qwen2.5-VL replayed on the meta device (torch " + torch.__version__ + ")",
            "cases": cases}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
