"""A family is one module: what only it reads is read nowhere else in ``hfconfig/``.

Every family with its own layout reader (``Family.layouts``) lives in ``hfconfig/families/<name>.py``
with its registration, its reader and its weight shapes; shared pieces are in ``families/_*.py``.
The check: each ``config.json`` key that such a family alone declares (``Family.keys``) appears as
the argument of a read (a method call: ``r.int("key")``, ``r.has("key")``, ``cfg.get("key")``...)
in no ``hfconfig`` module but its own. Families read by the generic reader
(:func:`kvcalc.hfconfig.generic.read_layouts`: ``layouts`` unset) leave their keys to it; a key two
families declare (``multi_query``: GPT-BigCode and Falcon) is shared, not owned.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from kvcalc.hfconfig.families import all_families
from kvcalc.hfconfig.families._index import MODULE_OF_MODEL_TYPE

HFCONFIG = Path(__file__).resolve().parent.parent / "kvcalc" / "hfconfig"


def own_keys() -> dict[str, str]:
    """``key -> family module`` for the keys one family with its own reader alone declares."""
    declared: dict[str, set[str]] = defaultdict(set)
    for family in all_families():
        for key in family.keys:
            declared[key].add(family.module)
    readers = {f.module for f in all_families() if f.layouts is not None}
    return {k: next(iter(m)) for k, m in declared.items() if len(m) == 1 and m <= readers}


def reads(path: Path) -> set[str]:
    """The string literals passed to method calls in ``path``: the keys it reads."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            found.update(
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            )
    return found


def test_no_module_reads_another_familys_keys():
    owners = own_keys()
    wrong = []
    for path in sorted(HFCONFIG.rglob("*.py")):
        for key in sorted(reads(path) & owners.keys()):
            if path != HFCONFIG / "families" / f"{owners[key]}.py":
                wrong.append(f"{path.relative_to(HFCONFIG)} reads {key!r} ({owners[key]}'s)")
    assert wrong == []


def test_the_families_with_readers_own_keys():
    owners = own_keys()
    # a few, by hand: Gemma 4's global heads, DeepSeek-V4's compressor, Nemotron-NAS's blocks,
    # LFM2's conv width, MiMo-V2's sliding heads
    assert {k: owners[k] for k in ("num_global_key_value_heads", "compress_ratios", "block_configs",
                                   "conv_dim", "swa_num_key_value_heads")} == {
        "num_global_key_value_heads": "gemma4", "compress_ratios": "deepseek_v4",
        "block_configs": "nemotron_nas", "conv_dim": "lfm2", "swa_num_key_value_heads": "mimo_v2",
    }  # fmt: skip


def test_the_checker_sees_a_read(tmp_path):
    path = tmp_path / "weights.py"
    path.write_text(
        'def f(r):\n    return r.int("global_head_dim", default=0) + r.raw.get("x")\nK = ("y",)\n'
    )
    assert reads(path) == {"global_head_dim", "x"}


def test_adding_a_family_is_one_file_and_an_index_line():
    """Every family module is named in the index, and no reader module is left outside families/."""
    modules = {p.stem for p in (HFCONFIG / "families").glob("*.py") if not p.stem.startswith("_")}
    assert set(MODULE_OF_MODEL_TYPE.values()) == modules - {"__init__"}
    assert sorted(p.name for p in HFCONFIG.glob("*famil*.py")) == ["family.py"]
