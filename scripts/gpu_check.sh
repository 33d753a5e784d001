#!/usr/bin/env bash
# GPU checks for `kvcalc verify`, prepared to run as one step on a machine with an NVIDIA GPU.
#
#   scripts/gpu_check.sh            # results under $OUT (or /tmp/kvcalc-gpu-check)
#
# Installs nothing and never touches the network (HF_HUB_OFFLINE=1, PIP_NO_INDEX=1): it needs the
# repository, torch with CUDA and transformers already installed. Runs the `gpu` test marker, then
# `verify --fill` for five deployments (appending calibration records), and prints one summary
# table. Expected wall time: 2-3 minutes; every step has a timeout, the whole under 5 minutes.
# Exit status: 0 all passed, 1 a check failed, 2 no CUDA device or a step could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PIP_NO_INDEX=1 PYTHONDONTWRITEBYTECODE=1
PY="${PYTHON:-python}"
OUT_DIR="${OUT:-${TMPDIR:-/tmp}/kvcalc-gpu-check}"
mkdir -p "$OUT_DIR"
RECORDS="$OUT_DIR/calibration.jsonl"

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: torch sees no CUDA device; nothing to check" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>/dev/null | tee "$OUT_DIR/nvidia-smi.csv"

echo "== pytest -m gpu"
timeout 150 "$PY" -m pytest -m gpu -q -p no:cacheprovider tests/test_verify_gpu.py 2>&1 | tee "$OUT_DIR/pytest-gpu.txt"
echo "${PIPESTATUS[0]}" > "$OUT_DIR/pytest-gpu.rc"

fill() {  # name, then verify arguments
    local name=$1
    shift
    echo "== verify --fill $name"
    timeout 40 "$PY" -m kvcalc verify "$@" --engine vllm --fill --json --record "$RECORDS" \
        > "$OUT_DIR/fill-$name.json" 2> "$OUT_DIR/fill-$name.err"
    echo $? > "$OUT_DIR/fill-$name.rc"
    head -c 400 "$OUT_DIR/fill-$name.err"
}
fill llama-3.1-8b llama-3.1-8b --max-model-len 8192
fill qwen3-8b-fp8 qwen3-8b --kv-cache-dtype fp8 --max-model-len 8192
fill deepseek-v2-lite tests/fixtures/deepseek-v2-lite --max-model-len 8192
fill gemma-3-1b gemma-3-1b-it
fill qwen3-next-8-layers qwen3-next-80b-a3b-thinking --layers 8 --max-model-len 8192

"$PY" - "$OUT_DIR" <<'PYEOF'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
rows, worst = [], 0
pytest_rc = int((out / "pytest-gpu.rc").read_text().strip() or 2)
tail = (out / "pytest-gpu.txt").read_text().strip().splitlines()
rows.append(("pytest -m gpu", "-", "-", "-", "-", "-", tail[-1] if tail else "no output", pytest_rc))
worst = max(worst, pytest_rc)
for path in sorted(out.glob("fill-*.json")):
    rc = int(path.with_suffix(".rc").read_text().strip() or 2)
    worst = max(worst, rc)
    try:
        d = json.loads(path.read_text())
    except ValueError:
        err = path.with_suffix(".err").read_text().strip().splitlines()
        rows.append((path.stem, "-", "-", "-", "-", "-", err[0] if err else "no output", rc))
        continue
    f = d["fill"]
    mib = 1 << 20
    rows.append((path.stem, d["device_name"], f"{f['planned_num_blocks']:,}", f"{f['allocatable_num_blocks']:,}",
                 f"{d['relative_error'] * 100:+.2f}%",
                 f"{f['predicted_non_torch_bytes'] / mib:,.0f}/{f['measured_non_torch_bytes'] / mib:,.0f}",
                 f"headroom {f['headroom_bytes'] / mib:,.0f} MiB, leaked {f['leaked_bytes']} B", rc))
head = ("check", "gpu", "planned blocks", "allocatable", "error", "non-torch MiB pred/meas", "notes", "rc")
widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
for r in [head, *rows]:
    print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))
print(f"calibration records: {out / 'calibration.jsonl'}")
sys.exit(0 if worst == 0 else (1 if worst == 1 else 2))
PYEOF
