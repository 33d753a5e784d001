"""Model references: local paths, bundled models, JSON reading. (The Hub is in test_hub.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hubserver import EXPECTED_BY_DTYPE, EXPECTED_TOTAL_BYTES, checkpoint_files

from kvcalc.errors import ConfigError, InputError, KvcalcError, ModelNotFoundError
from kvcalc.sources.files import MAX_CONFIG_BYTES, read_config_json
from kvcalc.sources.resolve import LoadedModel, load_model, looks_like_path, split_revision

#: 2 layers, 2 KV heads of 64 / 4 = 16 dims, bf16: 2 (K, V) x 2 x 2 x 16 x 2 B = 256 B per token
TINY = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 64,
    "intermediate_size": 16,
    "vocab_size": 64,
    "max_position_embeddings": 128,
    "torch_dtype": "bfloat16",
}
TINY_BYTES_PER_TOKEN = 2 * 2 * 2 * 16 * 2


def model_dir(
    tmp_path: Path,
    config: dict | bytes = TINY,
    files: dict[str, bytes] | None = None,
    name: str = "tiny-model",
) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    data = config if isinstance(config, bytes) else json.dumps(config).encode()
    (folder / "config.json").write_bytes(data)
    for fname, body in (files or {}).items():
        (folder / fname).write_bytes(body)
    return folder


# -- references -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "is_path"),
    [
        ("./m", True),
        ("../m", True),
        ("/abs/m", True),
        ("~/m", True),
        ("a/b/c", True),
        ("cfg.json", True),
        ("org/cfg.JSON", True),
        ("C:\\models\\m", True),
        ("org/name", False),
        ("org/name@v1", False),
        ("qwen3-8b", False),
        ("Qwen/Qwen3-8B", False),
    ],
)
def test_looks_like_path(text, is_path):
    assert looks_like_path(text) is is_path


@pytest.mark.parametrize(
    ("text", "revision", "expected"),
    [
        ("org/name", None, ("org/name", None)),
        ("org/name", "v1", ("org/name", "v1")),
        ("org/name@v1", None, ("org/name", "v1")),
        ("org/name@v1", "v1", ("org/name", "v1")),
        ("org/name@refs/pr/3", None, ("org/name", "refs/pr/3")),
    ],
)
def test_split_revision(text, revision, expected):
    assert split_revision(text, revision) == expected


@pytest.mark.parametrize(
    ("text", "revision"), [("org/name@", None), ("@v1", None), ("org/n@a", "b")]
)
def test_split_revision_rejects(text, revision):
    with pytest.raises(InputError):
        split_revision(text, revision)


# -- bundled --------------------------------------------------------------------------------
@pytest.mark.parametrize("ref", ["Qwen/Qwen3-8B", "qwen3-8b", "  QWEN/qwen3-8b "])
def test_bundled_by_id_or_alias(ref):
    m = load_model(ref)
    assert m.source == "bundled"
    assert m.shape.name == "Qwen/Qwen3-8B"
    # Qwen3-8B: 2 (K, V) x 36 layers x 8 KV heads x 128 head dim x 2 B (bf16)
    assert m.shape.bytes_per_token == 2 * 36 * 8 * 128 * 2 == 147_456
    assert m.location.endswith("Qwen--Qwen3-8B.json")
    assert m.revision is None and m.commit_hash is None
    assert m.weights_metadata() is None


def test_unknown_plain_name():
    with pytest.raises(ModelNotFoundError) as info:
        load_model("no-such-model-anywhere")
    assert info.value.code == "model-not-found"
    assert "org/name" in info.value.hint


@pytest.mark.parametrize("ref", ["./missing-folder", "missing.json", "a/b/c"])
def test_missing_path(ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelNotFoundError, match="no such file or folder") as info:
        load_model(ref)
    assert info.value.code == "path-not-found"


@pytest.mark.parametrize("ref", ["x" * 5000, "bad\0name"])
def test_references_no_file_system_can_hold(ref):
    with pytest.raises(ModelNotFoundError):
        load_model(ref)


def test_empty_reference():
    with pytest.raises(InputError, match="empty"):
        load_model("  ")


# -- local paths ----------------------------------------------------------------------------
def test_local_folder_with_safetensors(tmp_path):
    folder = model_dir(tmp_path, files=checkpoint_files(sharded=True))
    m = load_model(str(folder))
    assert isinstance(m, LoadedModel)
    assert m.source == "path"
    assert m.shape.name == "tiny-model"
    assert m.shape.bytes_per_token == TINY_BYTES_PER_TOKEN == 256
    assert m.config_path == folder / "config.json"
    assert m.location == str(folder / "config.json")
    w = m.weights_metadata()
    assert w.total_bytes == EXPECTED_TOTAL_BYTES == 8_900
    assert w.by_dtype == EXPECTED_BY_DTYPE
    assert w.source == "safetensors metadata (local)"
    assert m.weights_metadata() is w  # read once, then remembered


def test_local_config_file_and_relative_folder(tmp_path, monkeypatch):
    folder = model_dir(tmp_path, files=checkpoint_files(sharded=False))
    by_file = load_model(str(folder / "config.json"))
    assert by_file.shape.name == "tiny-model"
    assert by_file.weights_metadata().total_bytes == 8_900
    monkeypatch.chdir(tmp_path)
    assert load_model("tiny-model").source == "path"  # exists on disk: a path before anything
    assert load_model("./tiny-model").shape == by_file.shape


def test_loose_json_file_has_no_weights(tmp_path):
    folder = model_dir(tmp_path, files=checkpoint_files(sharded=False))
    loose = folder / "llama-variant.json"
    loose.write_text(json.dumps(TINY))
    m = load_model(str(loose))
    assert m.shape.name == "llama-variant"
    assert m.weights_metadata() is None


def test_folder_without_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match=r"has no config\.json") as info:
        load_model(str(tmp_path / "empty"))
    assert info.value.code == "config-missing"


def test_revision_on_a_path_is_refused(tmp_path):
    folder = model_dir(tmp_path)
    with pytest.raises(InputError, match="only applies to Hub models"):
        load_model(str(folder), revision="v1")


def test_trust_remote_code_config_is_only_read(tmp_path):
    """A config whose auto_map points at code: parsed as JSON, the code is never run."""
    marker = tmp_path / "executed"
    config = {
        **TINY,
        "model_type": "exotic",
        "auto_map": {"AutoConfig": "configuration_exotic.ExoticConfig"},
    }
    folder = model_dir(
        tmp_path,
        config=config,
        files={
            "configuration_exotic.py": f"open({str(marker)!r}, 'w').write('ran')\n".encode(),
        },
    )
    m = load_model(str(folder), trust_layout=True)  # "exotic" is no registered family
    assert m.shape.model_type == "exotic" and not m.shape.layout_validated
    assert m.shape.bytes_per_token == 256
    assert not marker.exists()


# -- reading JSON ---------------------------------------------------------------------------
def test_malformed_json_names_the_file_and_place(tmp_path):
    folder = model_dir(tmp_path, config=b'{\n  "num_hidden_layers": 2,\n  "hidden_size": ,\n}')
    with pytest.raises(ConfigError) as info:
        load_model(str(folder))
    err = info.value
    assert err.code == "config-malformed-json"
    assert err.message.startswith(f"{folder / 'config.json'}: malformed JSON at line 3, column 18")
    assert "\n" not in err.message


def test_non_utf8_config(tmp_path):
    folder = model_dir(tmp_path, config=b'{"model_type": "caf\xe9"}')
    with pytest.raises(ConfigError, match="not UTF-8 text \\(bad byte at offset 19\\)") as info:
        load_model(str(folder))
    assert info.value.code == "config-not-utf8"


def test_utf8_bom_is_fine(tmp_path):
    folder = model_dir(tmp_path, config=b"\xef\xbb\xbf" + json.dumps(TINY).encode())
    assert load_model(str(folder)).shape.bytes_per_token == 256


def test_oversized_config_is_not_read(tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    with (folder / "config.json").open("wb") as f:  # sparse: cheap to make
        f.truncate(MAX_CONFIG_BYTES + 1)
    with pytest.raises(ConfigError, match="is over 16 MiB") as info:
        load_model(str(folder))
    assert info.value.code == "config-too-large"


def test_deeply_nested_json(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ConfigError) as info:
        read_config_json(path)
    assert info.value.code == "config-malformed-json"


def test_top_level_array_is_a_config_error(tmp_path):
    folder = model_dir(tmp_path, config=b"[1, 2, 3]")
    with pytest.raises(KvcalcError) as info:
        load_model(str(folder))
    assert info.value.code == "config-invalid"


def test_unreadable_config(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_config_json(tmp_path)  # a folder cannot be opened as a file
    assert info.value.code == "config-unreadable"


# -- imports --------------------------------------------------------------------------------
def test_bundled_and_local_never_import_the_hub_client(tmp_path):
    folder = model_dir(tmp_path, files=checkpoint_files(sharded=False))
    code = (
        "import sys\n"
        "from kvcalc.sources.resolve import load_model\n"
        "assert load_model('qwen3-8b').weights_metadata() is None\n"
        f"assert load_model({str(folder)!r}).weights_metadata().total_bytes == 8900\n"
        "heavy = ('huggingface_hub', 'safetensors', 'torch', 'httpx2')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
