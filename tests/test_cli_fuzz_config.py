"""Mutated config.json files through the real CLI: a result or one `error[...]` line, exit 2, never
a traceback (hypothesis)."""

from __future__ import annotations

import copy
import json

from helpers import bundled_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcalc.registry import bundled_models

ALIASES = [m.alias for m in bundled_models()]
junk = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6), st.lists(st.integers(-2, 2), max_size=4), st.just({"a": {"b": [1]}}),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(alias=st.sampled_from(ALIASES), data=st.data(), command=st.sampled_from(["inspect", "plan"]))
def test_mutated_config_through_cli(cli, tmp_path_factory, alias, data, command):
    raw = copy.deepcopy(bundled_config(alias))
    target = raw.get("text_config", raw)
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(sorted(target)))
        if data.draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = data.draw(junk)
    folder = tmp_path_factory.mktemp("cfg")
    (folder / "config.json").write_text(json.dumps(raw, allow_nan=True))
    args = [command, str(folder)] + (["--kv-cache-memory", "10GiB", "--max-model-len", "4096"] if command == "plan" else [])
    result = cli(*args)
    assert "Traceback" not in result.stderr + result.stdout
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert lines[0].startswith("error[") and "error[internal]" not in lines[0], result.stderr
        assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: "))
    else:
        assert result.exit_code in (0, 1) and result.stdout


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=300))
def test_random_bytes_as_config(cli, tmp_path_factory, blob):
    folder = tmp_path_factory.mktemp("bytes")
    (folder / "config.json").write_bytes(blob)
    result = cli("inspect", str(folder))
    assert result.exit_code == 2
    assert result.stderr.startswith("error[") and "error[internal]" not in result.stderr
