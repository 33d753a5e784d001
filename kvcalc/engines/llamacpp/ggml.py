"""ggml's graph allocator, for sizing llama.cpp's compute buffer without running llama.cpp.

A faithful transcription of the parts of ggml (the version vendored by llama.cpp ``0c1e570``) that
decide how large a backend's compute buffer is:

- tensors (``ne``/``nb``, views with their root ``view_src``, input/output flags) and the ops a
  graph uses, with ggml's result shapes (``ggml.c``);
- ``ggml_build_forward_expand``'s depth-first visit order, nodes and leafs (``ggml_visit_parents``);
- ``ggml_gallocr_alloc_graph_impl`` with its in-place reuse (``ggml_op_can_inplace``, same layout,
  one child), freeing on the last child and the dynamic best-fit allocator
  (``ggml_dyn_tallocr_alloc``/``free_bytes``, 32-byte ``TENSOR_ALIGNMENT`` of the CPU buffer);
  the buffer size is the high-water mark ``max_size``.

Pure arithmetic, no ggml import. Only a single backend with no graph optimisation is modelled
(the CPU backend's ``graph_optimize`` is ``NULL``); GPU backends reorder graphs and size buffers
their own way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: ``TENSOR_ALIGNMENT`` (ggml-impl.h): the CPU buffer type's alignment
CPU_ALIGNMENT = 32
F32, F16, I32, I64 = 4, 2, 4, 8
#: ops ``ggml_op_can_inplace`` allows to overwrite their parent (those a graph here uses)
INPLACE = frozenset({"fill", "scale", "add", "add_id", "mul", "div", "sqr", "sqrt", "unary",
                     "rope", "rms_norm", "clamp", "soft_max"})  # fmt: skip


@dataclass(eq=False)
class Tensor:
    size: int  # bytes per element (ggml types with one value per block)
    ne: tuple[int, int, int, int]
    nb: tuple[int, int, int, int]
    op: str = "none"
    src: tuple[Tensor | None, ...] = ()
    view_src: Tensor | None = None
    #: data already set (weights, the KV cache, views of them)
    external: bool = False
    is_input: bool = False
    is_output: bool = False

    @property
    def nbytes(self) -> int:
        """``ggml_nbytes`` for one-value blocks."""
        if any(n <= 0 for n in self.ne):
            return 0
        return self.size + sum((n - 1) * b for n, b in zip(self.ne, self.nb, strict=True))

    @property
    def nelements(self) -> int:
        return self.ne[0] * self.ne[1] * self.ne[2] * self.ne[3]

    def same_layout(self, other: Tensor) -> bool:
        return self.size == other.size and self.ne == other.ne and self.nb == other.nb


def strides(size: int, ne: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    return size, size * ne[0], size * ne[0] * ne[1], size * ne[0] * ne[1] * ne[2]


def _ne(*dims: int) -> tuple[int, int, int, int]:
    full = (*dims, 1, 1, 1, 1)[:4]
    return full[0], full[1], full[2], full[3]


def new(size: int, *dims: int, op: str = "none", src: tuple[Tensor | None, ...] = ()) -> Tensor:
    ne = _ne(*dims)
    return Tensor(size=size, ne=ne, nb=strides(size, ne), op=op, src=src)


def external(size: int, *dims: int) -> Tensor:
    """A weight or cache tensor: allocated outside the compute buffer."""
    t = new(size, *dims)
    t.external = True
    return t


def inp(size: int, *dims: int) -> Tensor:
    """``ggml_set_input``: allocated first, in the compute buffer."""
    t = new(size, *dims)
    t.is_input = True
    return t


def dup(a: Tensor, op: str, *src: Tensor | None) -> Tensor:
    return new(a.size, *a.ne, op=op, src=(a, *src))


def _view(
    a: Tensor, ne: tuple[int, int, int, int], nb: tuple[int, int, int, int], op: str
) -> Tensor:
    root = a.view_src or a
    return Tensor(size=a.size, ne=ne, nb=nb, op=op, src=(a,), view_src=root, external=root.external)


def view(a: Tensor, *dims: int, nb: tuple[int, ...] = ()) -> Tensor:
    """``ggml_view_Nd``: ``nb`` gives ``nb[1:]`` (the offset does not matter for sizes)."""
    ne = _ne(*dims)
    nbs = list(strides(a.size, ne))
    nbs[1 : 1 + len(nb)] = nb
    return _view(a, ne, (nbs[0], nbs[1], nbs[2], nbs[3]), "view")


def reshape(a: Tensor, *dims: int) -> Tensor:
    ne = _ne(*dims)
    return _view(a, ne, strides(a.size, ne), "reshape")


def view_tensor(a: Tensor, op: str = "view") -> Tensor:
    return _view(a, a.ne, a.nb, op)


def permute(a: Tensor, *axes: int) -> Tensor:
    ne, nb = [0] * 4, [0] * 4
    for i, axis in enumerate(axes):
        ne[axis], nb[axis] = a.ne[i], a.nb[i]
    return _view(a, _ne(*ne), (nb[0], nb[1], nb[2], nb[3]), "permute")


def transpose(a: Tensor) -> Tensor:
    return permute(a, 1, 0, 2, 3)


def mul_mat(a: Tensor, b: Tensor) -> Tensor:
    return new(F32, a.ne[1], b.ne[1], b.ne[2], b.ne[3], op="mul_mat", src=(a, b))


def get_rows(a: Tensor, b: Tensor) -> Tensor:
    return new(F32, a.ne[0], b.ne[0], b.ne[1], b.ne[2], op="get_rows", src=(a, b))  # I32: also 4 B


def mul_mat_id(a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    """``ggml_mul_mat_id``: one matrix of ``a`` per selected expert, ``[a.ne1, ids.ne0, b.ne2]``."""
    return new(F32, a.ne[1], ids.ne[0], b.ne[2], op="mul_mat_id", src=(a, b, ids))


def argsort_top_k(a: Tensor, k: int) -> Tensor:
    """``ggml_argsort_top_k``: an I32 ``argsort`` of ``a``'s rows, viewed to its first ``k``."""
    order = new(I32, *a.ne, op="argsort", src=(a,))
    return view(order, k, *order.ne[1:], nb=order.nb[1:])


def sum_rows(a: Tensor) -> Tensor:
    return new(a.size, 1, *a.ne[1:], op="sum_rows", src=(a,))


def set_rows(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    t = view_tensor(a, "set_rows")
    t.src = (b, c, a)
    return t


def cont(a: Tensor, *dims: int) -> Tensor:
    return new(a.size, *(dims or a.ne), op="cont", src=(a,))


def glu_split(a: Tensor, b: Tensor) -> Tensor:
    return new(a.size, *a.ne, op="glu", src=(a, b))


def flash_attn_ext(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    return new(F32, v.ne[0], q.ne[2], q.ne[1], q.ne[3], op="flash_attn_ext", src=(q, k, v, mask))


@dataclass
class Graph:
    nodes: list[Tensor] = field(default_factory=list)
    leafs: list[Tensor] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)

    def expand(self, tensor: Tensor) -> None:
        """``ggml_build_forward_expand``: sources first, left to right, each tensor once."""
        stack: list[tuple[Tensor, int]] = [(tensor, 0)]
        if id(tensor) in self._seen:
            return
        self._seen.add(id(tensor))
        while stack:
            t, i = stack.pop()
            while i < len(t.src) and (t.src[i] is None or id(t.src[i]) in self._seen):
                i += 1
            if i < len(t.src):
                child = t.src[i]
                assert child is not None
                stack.append((t, i + 1))
                self._seen.add(id(child))
                stack.append((child, 0))
                continue
            (self.leafs if t.op == "none" else self.nodes).append(t)


@dataclass
class _Hash:
    children: int = 0
    views: int = 0
    offset: int = 0
    allocated: bool = False


class _DynAllocator:
    """``ggml_dyn_tallocr`` with one chunk (the CPU buffer type has no maximum size)."""

    def __init__(self, alignment: int) -> None:
        self.alignment = alignment
        self.blocks: list[list[int]] = [[0, 1 << 62]]  # [offset, size], sorted; the last is open
        self.max_size = 0

    def _align(self, size: int) -> int:
        return -(-size // self.alignment) * self.alignment

    def alloc(self, size: int) -> int:
        size = self._align(size)
        best, best_size = -1, None
        for i, (_, bsize) in enumerate(self.blocks[:-1]):
            if bsize >= size and (best_size is None or bsize <= best_size):
                best, best_size = i, bsize
        if best == -1:
            best = len(self.blocks) - 1  # the last block always has room
        block = self.blocks[best]
        offset = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.blocks[best]
        self.max_size = max(self.max_size, offset + size)
        return offset

    def free(self, offset: int, size: int) -> None:
        size = self._align(size)
        blocks = self.blocks
        for i, block in enumerate(blocks):
            if block[0] + block[1] == offset:
                block[1] += size
                if i < len(blocks) - 1 and block[0] + block[1] == blocks[i + 1][0]:
                    block[1] += blocks[i + 1][1]
                    del blocks[i + 1]
                return
            if offset + size == block[0]:
                block[0] = offset
                block[1] += size
                if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == block[0]:
                    blocks[i - 1][1] += block[1]
                    del blocks[i]
                return
        at = next((i for i, b in enumerate(blocks) if b[0] >= offset), len(blocks))
        blocks.insert(at, [offset, size])


def buffer_size(graph: Graph, alignment: int = CPU_ALIGNMENT) -> int:
    """The compute buffer ``ggml_gallocr_reserve`` sizes for ``graph`` (its ``max_size``)."""
    alloc = _DynAllocator(alignment)
    info: dict[int, _Hash] = {}

    def h(t: Tensor) -> _Hash:
        return info.setdefault(id(t), _Hash())

    def allocate(t: Tensor) -> None:
        hn = h(t)
        if t.external or hn.allocated or t.view_src is not None:
            return
        hn.allocated = True
        if t.op in INPLACE:
            for parent in t.src:
                if parent is None or not h(parent).allocated:  # external or a view: not own
                    continue
                if parent.is_output or not t.same_layout(parent):
                    continue
                ph = h(parent)
                if ph.children == 1 and ph.views == 0:
                    hn.offset = ph.offset
                    ph.allocated = False
                    return  # same layout: no extra space to give back
        hn.offset = alloc.alloc(t.nbytes)

    def release(t: Tensor) -> None:
        if t.is_output:
            return
        hn = h(t)
        alloc.free(hn.offset, t.nbytes)
        hn.allocated = False

    for leaf in graph.leafs:
        allocate(leaf)
    for node in graph.nodes:
        if node.view_src is not None:
            h(node.view_src).views += 1
        if node.is_input:
            allocate(node)
        for s in node.src:
            if s is not None:
                h(s).children += 1
                if s.is_input:
                    allocate(s)
    for node in graph.nodes:
        for parent in node.src:
            if parent is not None:
                allocate(parent)
        allocate(node)
        for parent in node.src:
            if parent is None:
                continue
            ph = h(parent)
            ph.children -= 1
            if ph.children or ph.views:
                continue
            if parent.view_src is not None:
                vh = h(parent.view_src)
                vh.views -= 1
                if vh.views == 0 and vh.children == 0 and vh.allocated:
                    release(parent.view_src)
            elif ph.allocated:
                release(parent)
    return alloc.max_size
