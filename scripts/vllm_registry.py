"""Record vLLM's model registry: every architecture it serves, by category, from its own source.

    # vLLM 0.33.0 (read from its installed registry.py; vLLM is not imported)
    $VLLMENV/bin/python scripts/vllm_registry.py > kvcalc/data/vllm_registry.json

The dictionaries of ``vllm/model_executor/models/registry.py`` (``_TEXT_GENERATION_MODELS``,
``_MULTIMODAL_MODELS``, ``_SPECULATIVE_DECODING_MODELS``, the pooling ones, the Transformers
backend's, and ``_PREVIOUSLY_SUPPORTED_MODELS``) are literals: they are read with
:func:`ast.literal_eval`. ``kvcalc models --architectures`` reads the file this writes;
``tests/test_architectures.py`` fails while an architecture in it has no status in kvcalc.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path

#: registry dictionary → the category kvcalc names it by
CATEGORIES = {
    "_TEXT_GENERATION_MODELS": "text-generation",
    "_MULTIMODAL_MODELS": "multimodal",
    "_SPECULATIVE_DECODING_MODELS": "speculative",
    "_EMBEDDING_MODELS": "pooling",
    "_LATE_INTERACTION_MODELS": "pooling",
    "_REWARD_MODELS": "pooling",
    "_TOKEN_CLASSIFICATION_MODELS": "pooling",
    "_SEQUENCE_CLASSIFICATION_MODELS": "pooling",
    "_TRANSFORMERS_SUPPORTED_MODELS": "transformers-backend",
    "_TRANSFORMERS_BACKEND_MODELS": "transformers-backend",
}
#: architectures vLLM no longer builds: name → the last release that did
REMOVED = "_PREVIOUSLY_SUPPORTED_MODELS"


def main() -> int:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        print("vllm is not installed in this Python", file=sys.stderr)
        return 2
    path = Path(next(iter(spec.submodule_search_locations))) / "model_executor/models/registry.py"
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == REMOVED:
            removed = ast.literal_eval(node.value)  # type: ignore[arg-type]
            rows = out.setdefault("removed", {})
            for arch, last in sorted(removed.items()):
                rows.setdefault(arch, {"last_release": last})
            continue
        if not isinstance(target, ast.Name) or target.id not in CATEGORIES:
            continue
        assert isinstance(node.value, ast.Dict), target.id
        category = out.setdefault(CATEGORIES[target.id], {})
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if key is None:  # ``**_OTHER``: recorded under its own name
                continue
            arch = ast.literal_eval(key)
            module, cls = ast.literal_eval(value)[:2]
            category.setdefault(arch, {"module": module, "class": cls})
    version = importlib.metadata.version("vllm")
    script = Path(__file__).read_bytes()
    record = {
        "provenance": {
            "kind": "engine-recording",
            "engine": f"vLLM {version}",
            "torch": "n/a (vLLM is not imported: its registry.py is parsed)",
            "transformers": "n/a",
            "tool": f"scripts/vllm_registry.py sha256:{hashlib.sha256(script).hexdigest()}",
            "source": f"vllm/model_executor/models/registry.py sha256:"
            f"{hashlib.sha256(source.encode()).hexdigest()}",
            "recorded": datetime.date.today().isoformat(),
            "command": "$VLLMENV/bin/python scripts/vllm_registry.py > kvcalc/data/vllm_registry.json",
        },
        "engine_version": version,
        "categories": {name: dict(sorted(rows.items())) for name, rows in sorted(out.items())},
    }
    json.dump(record, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
