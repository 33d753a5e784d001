"""``engines/vllm/startup.py``: the survivors of a mutation run (docs/testing.md, "Mutation
testing") killed with vLLM's own rule, ``requested = math.ceil(total · gpu_memory_utilization)``
refused when more than is free at the snapshot (``request_memory``, ``v1/worker/utils.py``,
vLLM 0.33.0), and the releases the module's docstring reads it in.
"""

from __future__ import annotations

import math

import pytest

from kvcalc.engines.vllm.startup import NCCL_CONTEXT_BYTES, fraction_fitting, startup_memory
from kvcalc.units import GIB

H100 = 85_061_827_297


def test_the_fraction_whose_request_is_exactly_what_is_free_fits():
    # ceil(8 GiB · 0.93) = ceil(7,988,639,170.56) = 7,988,639,171 B: with exactly that free vLLM
    # starts at 0.93 (it refuses only a request *larger* than what is free)
    free = math.ceil(8 * GIB * 0.93)
    assert free == 7_988_639_171
    assert fraction_fitting(free, 8 * GIB) == 0.93


def test_a_fraction_whose_float_request_rounds_past_what_is_free_is_stepped_down():
    # 24,000,000,000 B at 0.68 is 16,320,000,000 B exactly, but vLLM computes it in floats:
    # math.ceil(24e9 × 0.68) = 16,320,000,001 > 16,320,000,000 free, so it refuses 0.68;
    # 0.67 asks ceil(24e9 × 0.67) = 16,080,000,001 and starts
    assert math.ceil(24_000_000_000 * 0.68) == 16_320_000_001
    assert fraction_fitting(16_320_000_000, 24_000_000_000) == 0.67


@pytest.mark.parametrize(
    ("version", "device", "band"),
    [
        ("0.11", False, True),  # from 0.11 the snapshot is taken after NCCL starts
        ("0.13", False, True),
        ("0.14", True, True),  # request_memory names the device (cuda:0) from 0.14
    ],
)
def test_the_releases_at_the_edges_of_each_rule(version, device, band):
    m = startup_memory(H100, 1.0, gpus=2, version=version)
    assert m is not None and m.names_device is device
    assert (m.free_low_bytes == H100 - NCCL_CONTEXT_BYTES) is band
