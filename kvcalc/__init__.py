"""kvcalc: engine-exact KV-cache capacity planning for LLM serving.

The public API is pure and torch-free::

    from kvcalc import load_model, inspect_model
    model = load_model("llama-3.1-8b").shape
    model.bytes_per_token          # 131072
"""

from __future__ import annotations

from kvcalc.version import __version__

__all__ = ["__version__", "load_model", "inspect_model", "parse_config", "plan", "PlanInputs"]


def __getattr__(name: str):  # lazy re-exports keep `import kvcalc` cheap
    if name == "load_model":
        from kvcalc.sources.resolve import load_model

        return load_model
    if name == "inspect_model":
        from kvcalc.planning.inspect import inspect_model

        return inspect_model
    if name == "parse_config":
        from kvcalc.hfconfig import parse_config

        return parse_config
    if name == "plan":
        from kvcalc.planning.core import plan

        return plan
    if name == "PlanInputs":
        from kvcalc.planning.inputs import PlanInputs

        return PlanInputs
    raise AttributeError(name)
