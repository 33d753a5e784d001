"""SGLang 0.5.23's Mamba-state split under speculative decoding, against SGLang's own sizing.

``fixtures/sglang_0_5_23/speculative_hybrid.json`` was recorded with the SGLang reference tool (its
``run_scenario``, each entry's speculative server arguments passed to ``ServerArgs`` and the
runner's ``spec_algorithm`` set from them): ``_handle_max_mamba_cache``'s ``memory_budget_spec``
path, which reserves the intermediate SSM state of every draft token before the KV pool. Every
entry SGLang sizes must come out equal: the slots, their bytes, the intermediate reserve,
``max_total_num_tokens`` and ``max_running_requests``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcalc.engines.sglang import mamba
from kvcalc.hfconfig import parse_config

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "sglang_0_5_23" / "speculative_hybrid.json").read_text()
)
SIZED = [e for e in FIXTURE["entries"] if "max_mamba_cache_size" in e]
CASES = [
    pytest.param(e, id=f"{e['config'][:-5]}-{e['server_args']['speculative_algorithm']}-"
                 f"s{e['server_args']['speculative_num_steps']}-"
                 f"k{e['server_args']['speculative_eagle_topk']}-tp{e['tp']}-{e['kv_memory_gib']:g}")
    for e in SIZED
]  # fmt: skip


def test_every_entry_was_sized() -> None:
    assert SIZED and len(SIZED) == len(FIXTURE["entries"])


@pytest.mark.parametrize("entry", CASES)
def test_split_matches_sglang(entry: dict) -> None:
    model = parse_config(FIXTURE["configs"][entry["config"]], name=entry["config"])
    model = model.per_rank(entry["tp"])
    d = entry["server_args"]["speculative_num_draft_tokens"]
    s = mamba.split(model, entry["kv_memory_gib"], mamba.MambaOptions(spec_draft_tokens=d))
    assert s.slot_bytes == entry["mamba_cache_per_req_bytes"]
    assert s.slots == entry["max_mamba_cache_size"]
    capped = min(48, s.slots // s.slots_per_request)
    assert capped == entry["max_running_requests"]
    assert s.spec_state_bytes == s.slot_bytes * (capped + 1) * d
    assert s.kv_budget_bytes == entry["kv_budget_bytes_seen_by_config_from_budget"][0]
    cell = entry["pool_configurator_state"]["_cell_size"]
    assert s.kv_budget_bytes // cell == entry["max_total_num_tokens"]


def test_probe_qwen3_next_nextn_tp1_20gib() -> None:
    """Hand-checked: K = (20·0.9/1.9 GiB − 5p) // 1.8p = 70, p = 77,266,944 B; capped
    min(48, 70 // 5) = 14; reserve p · 15 · 4 = 4,636,016,640 B; KV 20 GiB − reserve − 71p =
    11,352,866,816 B // 24,576 = 461,949 tokens."""
    config = FIXTURE["configs"]["Qwen--Qwen3-Next-80B-A3B-Thinking.json"]
    s = mamba.split(parse_config(config, name="q3n"), 20.0, mamba.MambaOptions(spec_draft_tokens=4))
    assert (s.slots, s.spec_state_bytes) == (70, 4_636_016_640)
    assert s.kv_budget_bytes // 24_576 == 461_949
