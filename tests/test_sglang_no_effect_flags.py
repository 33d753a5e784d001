"""SGLang flags kvcalc calls "no effect on memory", given to SGLang 0.5.23 itself.

``tests/fixtures/sglang_0_5_23/no_effect_flags.json`` (``scripts/sglang_flag_probe.py``): each
command parsed by SGLang's own parser, resolved and checked as its launcher does
(``resolve_once``, ``check_server_args``), and its pool sized by the SGLang reference tool
(Llama-3.1-8B, TP 1, 20 GiB on an emulated H100). A flag SGLang accepts must leave the pool,
the request cap and the default memory fraction as they are without it and resolve no other
argument; a command SGLang refuses at start-up must be refused by kvcalc for the same flag.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from kvcalc.engines.flag_table import flag_table
from kvcalc.engines.sglang.server_flags import NO_EFFECT, NO_EFFECT_VALUES
from kvcalc.errors import InputError
from kvcalc.planning.servecmd import parse_serve_command

HERE = Path(__file__).parent / "fixtures" / "sglang_0_5_23"
DATA, DATA_2, DATA_3 = (
    json.loads((HERE / n).read_text())
    for n in ("no_effect_flags.json", "no_effect_flags_2.json", "no_effect_flags_3.json")
)
BASE = DATA["baseline"]
#: flags that stay not modelled, recorded beside the others (the fixture's notes)
CONTROLS = (
    "--enable-deterministic-inference",
    "--enable-mixed-chunk",
    "--disable-overlap-schedule",
)
TABLE = flag_table("sglang")


def _flags(argv: list[str]) -> list:
    return [f for f in (TABLE.resolve(t) for t in argv if t.startswith("--")) if f is not None]


def _command(argv: list[str]) -> str:
    return shlex.join(["python", "-m", "sglang.launch_server", "--model-path", "m", *argv])


ENTRIES = [
    e
    for e in DATA["entries"] + DATA_2["entries"] + DATA_3["entries"]
    if e["argv"][0] not in CONTROLS
]
ACCEPTED = [e for e in ENTRIES if e["status"] == "ok"]
REFUSED = [e for e in ENTRIES if e["status"] != "ok"]


def test_the_baseline_is_sglangs_own_pool():
    # Llama-3.1-8B at TP 1: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes = 131,072 B a
    # token; 20 GiB / 131,072 = 163,840 tokens; the fraction SGLang defaults to on an H100
    assert (BASE["max_total_num_tokens"], BASE["mem_fraction_static"]) == (163_840, 0.83)
    assert DATA_2["baseline"] == DATA_3["baseline"] == BASE
    assert len(ACCEPTED) == 42 + 19 + 15 and len(REFUSED) == 11 + 1 + 1
    # the 51 + 12 + 8 flags reviewed in 0.5.23's code and listed as no effect on memory (for
    # some values: --radix-eviction-policy, --sampling-backend, --load-format) after the first
    # list, each given to SGLang at least once
    assert len({f.name for e in ACCEPTED for f in _flags(e["argv"])}) == 51 + 12 + 8


@pytest.mark.parametrize("entry", ACCEPTED, ids=lambda e: " ".join(e["argv"])[:60])
def test_a_flag_sglang_accepts_changes_nothing_it_sizes_and_kvcalc_reads_it_as_such(entry):
    flags = _flags(entry["argv"])
    for key in ("max_total_num_tokens", "max_running_requests", "mem_fraction_static"):
        assert entry[key] == BASE[key], key
    # SGLang resolved no argument but the ones given (the tokenizer's batching flags are
    # switched off by --skip-tokenizer-init, which the probe passes: fewer, never more)
    # (and, for --radix-eviction-policy, that it was spelled: server_args.py
    # prepare_server_args keeps _radix_eviction_policy_explicitly_set beside the record)
    dests = {f.dest for f in flags}
    assert set(entry["resolved_changes"]) <= dests | {f"_{d}_explicitly_set" for d in dests}
    values = dict(zip(entry["argv"], [*entry["argv"][1:], None], strict=True))
    assert all(
        f.name in NO_EFFECT or values[f.name] in NO_EFFECT_VALUES.get(f.name, ()) for f in flags
    )
    read = parse_serve_command(_command(entry["argv"]))
    assert read.unmodelled == ()
    assert read.notes == (
        f"{', '.join(dict.fromkeys(f.name for f in flags))}: no effect on memory",
    )


@pytest.mark.parametrize("entry", REFUSED, ids=lambda e: " ".join(e["argv"])[:60])
def test_what_sglang_refuses_at_start_up_kvcalc_refuses_for_the_same_flag(entry):
    assert entry["failed_stage"] in ("resolve", "check")
    with pytest.raises(InputError) as err:
        parse_serve_command(_command(entry["argv"]))
    if entry["argv"] == ["--radix-eviction-policy", "tlru"]:  # not modelled for that value
        assert (
            err.value.code == "flag-not-modelled" and "--radix-eviction-policy" in err.value.message
        )
        return
    assert err.value.code == "invalid-serve-command"
    # the flag SGLang's message names (by option or by field; "Multimodal I/O worker num"
    # names none, and its command has one flag) is the flag kvcalc names
    flags = _flags(entry["argv"])
    named = [f for f in flags if f.name in entry["error"] or f.dest in entry["error"]]
    named = named or (flags if len(flags) == 1 else [])
    assert named and any(f.name in err.value.message for f in named), entry["error"]


def test_the_controls_stay_not_modelled_and_one_shows_why_the_probe_is_not_enough():
    controls = {e["argv"][0]: e for e in DATA["entries"] if e["argv"][0] in CONTROLS}
    assert set(controls) == set(CONTROLS)
    for name, entry in controls.items():
        assert name not in NO_EFFECT
        with pytest.raises(InputError) as err:
            parse_serve_command(_command(entry["argv"]))
        assert err.value.code == "flag-not-modelled"
    # deterministic inference resolves another argument (sglang/srt/arg_groups/overrides.py
    # _deterministic_allreduce_fusion_disable); the other two act after start-up (the prefill
    # graph runner, the hybrid pool configurators) and leave the resolution as it is
    assert controls["--enable-deterministic-inference"]["resolved_changes"] == {
        "enforce_disable_flashinfer_allreduce_fusion": True,
        "enable_deterministic_inference": True,
    }
    assert controls["--enable-mixed-chunk"]["resolved_changes"] == {"enable_mixed_chunk": True}


def test_numbers_are_read_as_sglangs_parser_reads_them():
    with pytest.raises(InputError, match="--port: invalid int value"):
        parse_serve_command(_command(["--port", "abc"]))
    with pytest.raises(InputError, match="invalid float value"):
        parse_serve_command(_command(["--schedule-conservativeness", "x"]))


def test_a_value_sglang_refuses_is_refused_even_where_it_is_not_modelled():
    # --sampling-backend intel_xpu is not modelled (a value outside the no-effect ones), and
    # SGLang refuses it without --device xpu (recorded in no_effect_flags_3.json): refused at
    # once, not left to --ignore-unmodelled; on an XPU both flags are reported not modelled
    with pytest.raises(InputError, match="requires --device xpu, got --device cuda") as err:
        parse_serve_command(_command(["--sampling-backend", "intel_xpu"]), ignore_unmodelled=True)
    assert err.value.code == "invalid-serve-command"
    xpu = ["--device", "xpu", "--sampling-backend", "intel_xpu"]
    read = parse_serve_command(_command(xpu), ignore_unmodelled=True)
    assert read.unmodelled == ("--device", "--sampling-backend")
    with pytest.raises(InputError) as err:
        parse_serve_command(_command(["--sampling-backend", "ascend"]))
    assert err.value.code == "flag-not-modelled" and "--sampling-backend" in err.value.message
