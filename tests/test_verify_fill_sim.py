"""``verify --fill``'s bookkeeping on a simulated GPU (no torch, no CUDA): budget arithmetic, the
planned vs allocatable block count, out-of-memory handling and clean-up. The real thing runs in
``test_verify_gpu.py`` (marker ``gpu``)."""

from __future__ import annotations

import math
import weakref
from types import SimpleNamespace

import pytest
from helpers import bundled_shape

from kvcalc.verify import torchenv
from kvcalc.verify.spec import VerifyOptions

GIB, MIB = 1 << 30, 1 << 20
H100_TOTAL = 85_029_158_912  # what the driver reports for an H100 80GB HBM3


class FakeOOM(RuntimeError):
    pass


class FakeCuda:
    """A GPU of ``total`` bytes whose CUDA context already holds ``context`` bytes."""

    def __init__(self, total: int, context: int) -> None:
        self.total, self.context, self.live = total, context, 0
        self.OutOfMemoryError = FakeOOM

    def mem_get_info(self, device=None):
        return self.total - self.context - self.live, self.total

    def memory_allocated(self, device=None):
        return self.live

    memory_reserved = memory_allocated

    def get_device_name(self, device=None):
        return "NVIDIA H100 80GB HBM3"

    def synchronize(self, device=None):
        pass

    def empty_cache(self):
        pass


class FakeTensor:
    def __init__(self, cuda: FakeCuda, nbytes: int) -> None:
        if nbytes > cuda.mem_get_info()[0]:
            raise FakeOOM(f"CUDA out of memory. Tried to allocate {nbytes} bytes")
        cuda.live += nbytes
        weakref.finalize(self, lambda: setattr(cuda, "live", cuda.live - nbytes))


def fake_torch(cuda: FakeCuda):
    def empty(*shape, dtype=None, device=None):
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return FakeTensor(cuda, math.prod(dims) * (2 if dtype == "bfloat16" else 1))

    return SimpleNamespace(
        cuda=cuda, empty=empty, uint8="uint8", bfloat16="bfloat16", __version__="fake"
    )


@pytest.fixture
def gpu(monkeypatch):
    def make(context: int) -> FakeCuda:
        cuda = FakeCuda(H100_TOTAL, context)
        monkeypatch.setattr(torchenv, "import_torch", lambda: fake_torch(cuda))
        monkeypatch.setattr(
            torchenv,
            "resolve_device",
            lambda name: SimpleNamespace(type="cuda", __str__=lambda s: "cuda:0"),
        )
        return cuda

    return make


def fill(**kw):
    from kvcalc.verify.fill import verify_fill

    return verify_fill(
        bundled_shape("llama-3.1-8b"), VerifyOptions(max_model_len=8192), device="cuda", **kw
    )


@pytest.mark.parametrize("context_mib", [200, 358, 600])
def test_allocatable_blocks_follow_the_real_context(gpu, context_mib):
    cuda = gpu(context_mib * MIB)
    r = fill()
    f = r.fill
    assert f.bytes_per_block == 32 * 65_536  # 32 layers × 2·16·8·128·2 B
    reserve = f.weights_bytes + f.activation_bytes + f.cudagraph_bytes
    assert f.budget_bytes == math.ceil(H100_TOTAL * 0.92)
    # every block that fits under the budget once the real context, weights and reserve are in use
    assert (
        f.allocatable_num_blocks == (f.budget_bytes - cuda.context - reserve) // f.bytes_per_block
    )
    # the plan booked its own non-torch estimate instead of the context
    assert (
        f.planned_num_blocks
        == (f.budget_bytes - f.predicted_non_torch_bytes - reserve) // f.bytes_per_block
    )
    assert f.measured_non_torch_bytes == cuda.context and f.leaked_bytes == 0 and cuda.live == 0
    assert 0 <= f.headroom_bytes < f.bytes_per_block
    gap = (f.planned_num_blocks - f.allocatable_num_blocks) * f.bytes_per_block
    assert abs(f.measured_overhead_bytes - f.predicted_overhead_bytes - gap) == 0
    assert r.passed == (abs(r.relative_error) <= 0.01)


def test_out_of_memory_is_caught_and_freed(gpu):
    cuda = gpu(500 * MIB)
    r = fill(oversubscribe_bytes=1 << 40)
    assert r.fill.oom_caught and not r.passed
    assert r.fill.allocatable_num_blocks > 0  # the fill went on after the failed request
    assert cuda.live == 0 and r.fill.leaked_bytes == 0


def test_weights_that_do_not_fit(gpu):
    cuda = gpu(500 * MIB)
    cuda.total = 8 * GIB  # a small card: 15 GiB of weights cannot be placed
    r = fill()
    # the plan predicted no cache at all, and the emulation confirms it
    assert r.fill.planned_num_blocks == r.fill.allocatable_num_blocks == 0 and r.passed
    assert any("weights placeholder does not fit" in n for n in r.notes) and cuda.live == 0


def test_fill_refuses_cpu():
    from kvcalc.errors import KvcalcError
    from kvcalc.verify.fill import verify_fill

    pytest.importorskip("torch")
    with pytest.raises(KvcalcError) as err:
        verify_fill(bundled_shape("llama-3.1-8b"), VerifyOptions(), device="cpu")
    assert err.value.code == "needs-cuda"


# -- errors and Ctrl-C: nothing stays allocated -----------------------------------------------------
class Interrupting(FakeCuda):
    """A GPU whose driver query raises ``exc`` on its ``after``-th call, mid-fill (as Ctrl-C would)."""

    def __init__(self, total: int, context: int, *, after: int, exc: BaseException) -> None:
        super().__init__(total, context)
        self.calls, self.after, self.exc = 0, after, exc

    def mem_get_info(self, device=None):
        self.calls += 1
        if self.calls == self.after:
            raise self.exc
        return super().mem_get_info(device)


@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt(), RuntimeError("CUDA error: an illegal memory access")]
)
@pytest.mark.parametrize("after", [4, 6, 12, 40])
def test_an_interrupt_or_error_mid_fill_frees_everything(monkeypatch, exc, after):
    cuda = Interrupting(H100_TOTAL, 500 * MIB, after=after, exc=exc)
    monkeypatch.setattr(torchenv, "import_torch", lambda: fake_torch(cuda))
    monkeypatch.setattr(torchenv, "resolve_device", lambda name: SimpleNamespace(type="cuda"))
    with pytest.raises(type(exc)) as info:
        fill()
    assert cuda.calls == after  # it was interrupted where intended, with memory allocated
    assert cuda.live == 0, f"{cuda.live:,} B still allocated while the exception is alive"
    assert info.value is exc


def test_an_interrupt_during_the_layout_check_frees_the_buffer_its_frames_held(monkeypatch):
    """Ctrl-C while a buffer's views are built: the frame that held the buffer stays alive in the
    traceback, so the check clears those frames before freeing (else the memory outlives it)."""
    from kvcalc.verify import alloc
    from kvcalc.verify.layout import allocation_plan

    cuda = FakeCuda(H100_TOTAL, 500 * MIB)
    monkeypatch.setattr(torchenv, "import_torch", lambda: fake_torch(cuda))
    monkeypatch.setattr(torchenv, "probe", lambda device: torchenv.Probe())
    monkeypatch.setattr(torchenv, "release", lambda device: None)
    monkeypatch.setattr(alloc, "check_room", lambda nbytes, device: None)
    monkeypatch.setattr(
        alloc, "_allocate", lambda torch, spec, device, touch: FakeTensor(cuda, spec.nbytes)
    )
    built = []

    def views(torch, buffer, spec, sums, problems):
        built.append(spec.name)
        if len(built) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(alloc, "_views", views)
    plan = allocation_plan(bundled_shape("llama-3.1-8b"), VerifyOptions())
    with pytest.raises(KeyboardInterrupt) as info:
        alloc.allocate_and_measure(plan, SimpleNamespace(type="cuda"))
    assert len(built) == 3 and info.tb is not None  # the traceback (and its frames) is alive
    assert cuda.live == 0, f"{cuda.live:,} B still allocated while the exception is alive"


def test_ctrl_c_through_the_cli_is_aborted_and_freed(cli, monkeypatch):
    cuda = Interrupting(H100_TOTAL, 500 * MIB, after=8, exc=KeyboardInterrupt())
    monkeypatch.setattr(torchenv, "import_torch", lambda: fake_torch(cuda))
    monkeypatch.setattr(torchenv, "resolve_device", lambda name: SimpleNamespace(type="cuda"))
    result = cli("verify", "llama-3.1-8b", "--fill", "--max-model-len", "8192", "--json")
    assert result.exit_code == 130 and result.stderr.strip() == "aborted" and result.stdout == ""
    assert cuda.calls == 8 and cuda.live == 0
