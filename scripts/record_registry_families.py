"""Turn the vLLM reference harness's output into ``registry_families.json`` scenario rows.

    python scripts/record_registry_families.py OUT.json --check
    python scripts/record_registry_families.py OUT.json --write --configs DIR --sources SOURCES.json
    python scripts/record_registry_families.py OUT.json --write --fixture FILE --configs DIR ...

``OUT.json`` is what ``vllm_reference.py --batch ... --out OUT.json`` wrote (its ``entries`` and its
``extra_entries``: a model at the length vLLM derives from its config when every requested length
was refused). One row per scenario, in the harness's order:

* sized: ``block_size``, ``num_blocks``, ``kv_cache_tokens``, ``max_concurrency`` (6 decimals),
  ``groups`` (per group: the spec kind, layers, the worker's page bytes, block size, blocks per
  request, window) and vLLM's capacity ``log_line``;
* a scenario at the derived length: ``max_model_len`` null and ``derived_max_model_len`` (for one
  vLLM refused before resolving it, the length the model's other such scenarios resolved);
* refused: ``error`` (the exception type and its text; a bare ``assert``: its source line from the
  traceback) and ``failed_stage``.

``--check`` exits 1 naming each model whose recorded rows differ from what ``OUT.json`` converts to
(``tests/test_record_registry_families.py`` runs it on a stored harness output). ``--write`` puts
the models of ``OUT.json`` into the fixture: each model's config from ``DIR/NAME`` (the file the
harness read) and its ``source`` from ``SOURCES.json`` (``{NAME: sentence}``); models already there
keep their source unless ``SOURCES.json`` names them. ``--fixture`` names another fixture of the
same form (``registry_families_recurrent.json``: the recurrent families, recorded apart;
``registry_families_2026_12.json``: the families added in December 2026;
``registry_families_2026_12b.json``: those whose config class is remote code, recorded through
``scripts/vllm_remote_configs.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent.parent / "tests/fixtures/vllm_0_33/registry_families.json"
GPU = "h100"


def error_text(entry: dict[str, Any]) -> str:
    """``Type: message``; a bare assert (no message) is named by its source line."""
    kind, message = entry.get("error_type", "Error"), entry.get("error") or ""
    if not message:
        lines = [x.strip() for x in entry.get("traceback_tail", ())]
        asserts = [x for x in lines if x.startswith("assert ")]
        message = asserts[-1] if asserts else ""
    return f"{kind}: {message}"


def row(entry: dict[str, Any], gpu: str = GPU, derived: int | None = None) -> dict[str, Any]:
    """One fixture scenario row from one harness entry (``derived``: the model's derived length,
    for a scenario at it that vLLM refused before resolving its config)."""
    s = entry["scenario"]
    out: dict[str, Any] = {
        "gpu": gpu,
        "kv_cache_dtype": s["kv_cache_dtype"],
        "tensor_parallel_size": s["tensor_parallel_size"],
        "max_model_len": s["max_model_len"],
        "available_kv_bytes": s["available_kv_memory_bytes_per_gpu"],
    }
    if s["max_model_len"] is None:
        resolved = entry.get("resolved_config", {}).get("max_model_len", derived)
        if resolved is not None:
            out["derived_max_model_len"] = resolved
    if entry["status"] != "ok":
        out["error"] = error_text(entry)
        out["failed_stage"] = entry.get("failed_stage")
        return out
    out.update(
        block_size=entry["block_size"],
        num_blocks=entry["num_blocks"],
        kv_cache_tokens=entry["gpu_kv_cache_size_tokens"],
        max_concurrency=round(entry["max_concurrency"], 6),
        groups=[
            [
                g["representative_spec"]["kind"],
                g["num_layers"],
                g["worker_group_page_size_bytes"],
                g["representative_spec"]["block_size"],
                g["blocks_per_request"],
                g["representative_spec"].get("sliding_window"),  # a MambaSpec has none
            ]
            for g in entry["kv_cache_groups"]
        ],
        log_line=entry["capacity_log_line"],
    )
    return out


def rows_by_model(harness: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``model -> rows`` for every entry (and extra entry) of a harness output."""
    gpu = harness.get("environment", {}).get("emulated_gpu", GPU)
    extra = harness.get("extra_entries", ())
    # the length vLLM derived for a model, from its extra entries that got as far as resolving it
    derived = {
        e["model"]: e["resolved_config"]["max_model_len"] for e in extra if "resolved_config" in e
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in [*harness["entries"], *extra]:
        out.setdefault(entry["model"], []).append(row(entry, gpu, derived.get(entry["model"])))
    return out


def check(harness: dict[str, Any], fixture: dict[str, Any]) -> list[str]:
    """The models whose recorded rows are not what the harness output converts to."""
    problems = []
    for name, rows in rows_by_model(harness).items():
        model = fixture["models"].get(name)
        if model is None:
            problems.append(f"{name}: not in the fixture")
        elif model["scenarios"] != rows:
            problems.append(f"{name}: recorded rows differ from the harness output")
    return problems


def write(
    harness: dict[str, Any], fixture: dict[str, Any], configs: Path, sources: dict[str, str]
) -> None:
    models = fixture["models"]
    for name, rows in rows_by_model(harness).items():
        source = sources.get(name) or models.get(name, {}).get("source")
        if not source:
            raise SystemExit(f"{name}: no source (name it in --sources)")
        config = json.loads((configs / name).read_text())
        models[name] = {"source": source, "config": config, "scenarios": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("harness", type=Path, help="vllm_reference.py --batch output")
    p.add_argument("--fixture", type=Path, default=FIXTURE)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 where rows differ")
    mode.add_argument("--write", action="store_true", help="put the models into the fixture")
    p.add_argument("--configs", type=Path, help="(--write) the folder of the configs recorded")
    p.add_argument("--sources", type=Path, help="(--write) JSON {model: source sentence}")
    args = p.parse_args(argv)
    harness = json.loads(args.harness.read_text())
    fixture = json.loads(args.fixture.read_text())
    if args.check:
        problems = check(harness, fixture)
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    if args.configs is None:
        p.error("--write needs --configs")
    sources = json.loads(args.sources.read_text()) if args.sources else {}
    write(harness, fixture, args.configs, sources)
    args.fixture.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
