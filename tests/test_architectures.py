"""``kvcalc models --architectures``: every architecture of vLLM 0.33's registry (recorded from its
own ``registry.py`` by ``scripts/vllm_registry.py``) has kvcalc's status — exact (a family reads
its configs) or refused by name with the reason — so a new vLLM release's architectures, once its
registry is recorded, fail here until each is added or refused."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT

from kvcalc.errors import KvcalcError
from kvcalc.hfconfig import parse_config
from kvcalc.hfconfig.families import all_families
from kvcalc.planning.api import architectures_reference
from kvcalc.planning.architectures_refused import REFUSED_BY_NAME
from kvcalc.render.json_shapes import schema

RECORDED = json.loads((ROOT / "kvcalc" / "data" / "vllm_registry.json").read_text("utf-8"))
DECLARED = {a: f.name for f in all_families() for a in f.architectures}


def test_the_recording_is_vllm_0_33s_registry():
    # vLLM 0.33.0's registry.py: _TEXT_GENERATION_MODELS 124, _MULTIMODAL_MODELS 127 (the counts
    # the issue quotes), and the rest of its tables
    assert RECORDED["engine_version"] == "0.33.0"
    assert RECORDED["provenance"]["engine"] == "vLLM 0.33.0"
    sizes = {name: len(rows) for name, rows in RECORDED["categories"].items()}
    assert sizes == {"multimodal": 127, "pooling": 68, "removed": 50, "speculative": 68,
                     "text-generation": 124, "transformers-backend": 35}  # fmt: skip
    assert RECORDED["categories"]["text-generation"]["LlamaForCausalLM"] == {
        "module": "llama", "class": "LlamaForCausalLM"}  # fmt: skip
    assert RECORDED["categories"]["removed"]["MiniMaxText01ForCausalLM"] == {
        "last_release": "0.23.0"}  # fmt: skip


def test_every_architecture_has_a_status():
    listing = architectures_reference()
    unreviewed = [(r.category, r.architecture) for r in listing.rows if r.status == "unreviewed"]
    assert unreviewed == [], "add a family, or refuse it by name in architectures_refused.py"
    assert len(listing.rows) == sum(len(v) for v in RECORDED["categories"].values())


def test_refused_by_name_are_neither_stale_nor_declared():
    for category, names in REFUSED_BY_NAME.items():
        registered = RECORDED["categories"][category]
        assert set(names) <= set(registered), f"not in vLLM's {category} table"
        declared = sorted(set(names) & set(DECLARED))
        assert declared == [], f"{category}: a family reads these now: remove them here"


def test_every_declared_architecture_is_in_vllms_registry():
    """A family's architecture name that vLLM does not know is a typo or a guess."""
    known = {a for rows in RECORDED["categories"].values() for a in rows}
    assert sorted(set(DECLARED) - known) == []


def test_counts_and_statuses():
    listing = architectures_reference()
    counts = {c.category: (c.exact, c.total) for c in listing.counts}
    exact = Counter(r.category for r in listing.rows if r.status == "exact")
    assert counts["text-generation"] == (exact["text-generation"], 124)
    assert counts["multimodal"] == (exact["multimodal"], 127)
    by_name = {(r.category, r.architecture): r for r in listing.rows}
    llama = by_name[("text-generation", "LlamaForCausalLM")]
    assert (llama.status, llama.family, llama.example) == ("exact", "llama", "llama-2-13b-hf")
    # kvcalc's MiniMax-01 family reads the config, but vLLM 0.33 no longer builds it
    removed = by_name[("removed", "MiniMaxText01ForCausalLM")]
    assert removed.status == "refused" and "last in v0.23.0" in removed.reason
    assert by_name[("pooling", "BertModel")].status == "refused"


def test_the_docs_quote_the_counts():
    """docs/engines.md quotes the counts `kvcalc models --architectures` prints."""
    listing = architectures_reference()
    counts = ", ".join(f"{c.category} {c.exact} of {c.total}" for c in listing.counts)
    text = " ".join((ROOT / "docs" / "engines.md").read_text("utf-8").split())
    assert f"exact in kvcalc: {counts}" in text


@pytest.fixture(scope="module")
def with_engines():
    return architectures_reference(engines=True)


def test_engine_support_is_planning_the_bundled_example(with_engines):
    by_name = {(r.category, r.architecture): r for r in with_engines.rows}
    llama = {e.engine: e.status for e in by_name[("text-generation", "LlamaForCausalLM")].engines}
    assert llama == dict.fromkeys(("vllm", "sglang", "llamacpp", "hf", "trtllm", "lmdeploy"),
                                  "planned")  # fmt: skip
    # Qwen3-Next's Gated DeltaNet state: TensorRT-LLM's and LMDeploy's pools are not modelled
    nxt = {e.engine: e for e in by_name[("text-generation", "Qwen3NextForCausalLM")].engines}
    assert nxt["vllm"].status == "planned" and nxt["sglang"].status == "planned"
    assert nxt["trtllm"].status == "unsupported-model" and nxt["trtllm"].reason
    assert nxt["lmdeploy"].status == "unsupported-model"
    # refused and example-less rows carry no engine figures
    assert all(not r.engines for r in with_engines.rows if r.status != "exact" or not r.example)


def test_json_matches_its_schema(cli):
    result = cli("models", "--architectures", "--json")
    assert result.exit_code == 0, result.stderr
    jsonschema.validate(result.json, schema("architectures"))
    assert result.json["engine_version"] == "0.33.0"


def test_table_fits_80_columns(cli):
    result = cli("models", "--architectures")
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert result.stdout.startswith("vLLM 0.33.0's registry, exact in kvcalc: text-generation ")


def test_every_architecture_without_a_family_is_surveyed():
    """Each text-generation and multimodal architecture refused for want of a family says where a
    public configuration of it is (``kvcalc/data/architecture_configs.json``), or is refused as
    having none: a new registry entry without a family fails here until it is surveyed."""
    from kvcalc.planning.architectures_refused import NO_PUBLIC_CONFIG, config_sources

    sources = config_sources()
    listing = architectures_reference()
    unsurveyed = []
    for r in listing.rows:
        if r.category not in ("text-generation", "multimodal") or r.status != "refused":
            continue
        if "no kvcalc family reads its config yet" in r.reason or r.reason == NO_PUBLIC_CONFIG:
            entry = sources.get(r.architecture)
            if entry is None or entry["category"] != r.category:
                unsurveyed.append(r.architecture)
                continue
            # none ⇔ refused as having no public configuration, and then no source is named
            assert (entry["source"] == "none") == (r.reason == NO_PUBLIC_CONFIG), r.architecture
            assert bool(r.config_source) == (entry["source"] != "none"), r.architecture
    assert unsurveyed == [], "survey them in kvcalc/data/architecture_configs.json"
    # a surveyed architecture is one of vLLM's text-generation or multimodal ones (a family added
    # later leaves its entry: it says where its config came from)
    for arch, entry in sources.items():
        assert arch in RECORDED["categories"][entry["category"]], arch
        assert entry["source"] in ("config-class", "published", "unlocated", "none"), arch
        if entry["source"] == "config-class":
            where, cls = entry["config_class"].split(":")
            assert where in ("transformers", "vllm") and cls.endswith("Config"), arch
        if entry["source"] == "published":
            assert entry["config_json"].endswith("/config.json") and entry["named_by"], arch
    by_name = {(r.category, r.architecture): r for r in listing.rows}
    llava = by_name[("multimodal", "LlavaForConditionalGeneration")]
    if llava.status == "refused":  # until a LLaVA family lands
        assert llava.config_source == "transformers LlavaConfig, model_type llava"
    pangu = by_name[("text-generation", "PanguProMoEV2ForCausalLM")]
    assert (pangu.reason, pangu.config_source) == (NO_PUBLIC_CONFIG, "")
    assert by_name[("text-generation", "LlamaForCausalLM")].config_source == ""


def test_the_table_names_the_config_source(cli):
    result = cli("models", "--architectures")
    text = " ".join(result.stdout.split())
    assert (
        "refused (1): no public configuration found (searched: transformers 5.20 and vLLM "
        "0.33 config classes, published config.json files): PanguProMoEV2ForCausalLM" in text
    )
    assert "Step5ForCausalLM (vllm Step5Config, model_type step5)" in text


RNJ1 = json.loads((Path(__file__).parent / "fixtures/vllm_0_33/rnj1_refused.json").read_text())


@pytest.mark.parametrize("name", sorted(RNJ1["models"]))
def test_rnj1_is_refused_where_vllm_cannot_build_it(name):
    # every recorded scenario failed building the model on the emulated H100 (FLASH_ATTN does not
    # take rnj1.py's chunk_lookback); kvcalc refuses the config, and the listing quotes vLLM's error
    model = RNJ1["models"][name]
    errors = {s["error"] for s in model["scenarios"]}
    assert len(model["scenarios"]) == 8 and len(errors) == 1
    with pytest.raises(KvcalcError) as err:
        parse_config(model["config"], name=name)
    assert err.value.code == "config-unverified"
    reason = REFUSED_BY_NAME["text-generation"]["Rnj1ForCausalLM"]
    assert errors.pop().split(": ", 1)[1] in reason


#: config classes vLLM 0.33 fails on, recorded: (category, file)
NOT_BUILT = {
    category: json.loads((Path(__file__).parent / "fixtures/vllm_0_33" / name).read_text())
    for category, name in (
        ("text-generation", "registry_text_not_built.json"),
        ("multimodal", "registry_mm_not_built.json"),
    )
}


@pytest.mark.parametrize(
    ("category", "name"), [(c, n) for c, d in NOT_BUILT.items() for n in sorted(d["models"])]
)
def test_config_classes_vllm_fails_on_are_refused_with_its_error(category, name):
    # the class defaults fail in vLLM (recorded); kvcalc has no family for them, and the listing
    # gives vLLM's exception and the start of its message
    model = NOT_BUILT[category]["models"][name]
    with pytest.raises(KvcalcError) as err:
        parse_config(model["config"], name=name)
    assert err.value.code == "config-unverified"
    reason = REFUSED_BY_NAME[category][model["architecture"]]
    (row,) = model["scenarios"]
    kind, message = row["error"].split(": ", 1)
    lines = message.split(
        "\n"
    )  # pydantic's ValidationError: the validator's text after "Value error, "
    text = next((x.split("Value error, ", 1)[1] for x in lines if "Value error, " in x), lines[0])
    assert f"({kind}: " in reason and text.split(". ")[0][:60] in reason
