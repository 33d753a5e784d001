"""What the boards between the GPUs decide for vLLM's memory: NCCL's buffers, its all-reduce in graphs."""

from __future__ import annotations

from kvcalc.model.gpus import GpuSpec


def nvswitch_class(gpu: GpuSpec | None) -> bool:
    """An NVIDIA Hopper/Blackwell data-centre board of NVSwitch systems (SXM, GH200, B200), where
    NCCL allocates NVLink SHARP buffers; unknown GPUs count as one (the larger, measured figure)."""
    if gpu is None:
        return True
    name = gpu.name.lower()
    major = int((gpu.compute_capability or "0").partition(".")[0] or 0)
    consumer = name.startswith("rtx") or "pcie" in name or "nvl" in name
    return gpu.vendor.lower() == "nvidia" and major in (9, 10) and not consumer


def nccl_in_graphs(gpu: GpuSpec | None, tp: int) -> bool:
    """vLLM's custom all-reduce is off (``CustomAllreduce``: not on more than two GPUs without
    full NVLink), so NCCL's all-reduce runs inside the graphs: TP > 2 on a PCIe or paired-NVLink
    board (not NVSwitch-class, not A100 SXM, not AMD)."""
    if tp <= 2 or gpu is None:
        return False
    name = gpu.name.lower()
    return not (nvswitch_class(gpu) or name.startswith("a100") or gpu.vendor.lower() != "nvidia")
