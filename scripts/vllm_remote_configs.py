"""Run the vLLM reference harness with stand-ins for configuration classes that are remote code.

    VLLM_REFERENCE=HARNESS_DIR python scripts/vllm_remote_configs.py ARGS...   (vLLM 0.33.0 venv)
    VLLM_REFERENCE=HARNESS_DIR python scripts/vllm_remote_configs.py --probe PROBE_ARGS...

The checkpoints of InternLM2, InternLM3, MiniCPM, EXAONE 3, Solar, Orion, DeepSeek (V1), Bailing
MoE (and V2), TeleFLM, openPangu Ultra MoE, Sarvam-MLA, K2 Horizon, Param-2 MoE, AliceAI and Phi-3-Vision ship their config class as remote code
(``auto_map``, ``trust_remote_code``), and so do InternVL chat's (``internvl_chat``, a composite:
see ``REMOTE_COMPOSITES``): neither transformers 5.20 nor vLLM 0.33's config registry
has it, and the harness cannot run a checkpoint's code offline. Each of those published classes
stores its ``config.json`` keys as attributes; the stand-in registered here for each
``model_type`` is a plain ``transformers.PretrainedConfig`` subclass that does the same and
nothing else (no defaults), so vLLM's model file reads exactly the keys the config carries and a
key it needs that the config lacks fails as ``AttributeError``. A model type transformers has
(``bailing_hybrid``) keeps its class. One way the stand-in can differ from a published class:
transformers' ``PretrainedConfig`` turns ``rope_theta`` with a non-null ``rope_scaling`` passed
as extra keys into ``rope_parameters`` and drops both attributes, which a class that takes
``rope_theta`` as its own argument keeps; a model file reading ``config.rope_theta`` then fails
on the stand-in alone (Param-2 MoE's ``param2moe.py``), so such configs were not recorded. The
configs recorded with it carry every key explicitly. ``ARGS`` are ``vllm_reference.py``'s own
(``--batch``, ``--config-dir``, ...); everything else (engine config, model build on the meta
device, specs, groups, sizing) is the harness and vLLM's code, unchanged. With ``--probe`` the
stand-ins are registered and the harness's ``deploy_probe.py`` runs unchanged in this process on
``PROBE_ARGS`` (its own positional arguments: the weights per rank of a remote-code checkpoint).
"""

import os
import sys

# the vLLM reference harness's folder (vllm_reference.py)
sys.path.insert(0, os.environ["VLLM_REFERENCE"])
import vllm_reference as vr  # noqa: E402

#: model types whose published config class is remote code
REMOTE_MODEL_TYPES = (
    "internlm2",
    "internlm3",
    "minicpm",
    "exaone",
    "solar",
    "orion",
    "deepseek",
    "bailing_moe",
    "bailing_moe_v2",
    "teleflm",
    "pangu_ultra_moe",
    "sarvam_mla",
    "k2_horizon",
    "param2moe",
    "alice_ai",
    "phi3_v",
    "intern_vit_6b",
)
#: remote composite classes: model type -> (sub-config key, its class) for each sub-config the
#: published class builds from a dict. InternVL chat's ``InternVLChatConfig``
#: (``configuration_internvl_chat.py``) builds ``vision_config`` as ``InternVisionConfig`` and
#: ``llm_config`` as the class its ``architectures`` names (``Qwen2ForCausalLM``: ``Qwen2Config``,
#: ...): here the sub-config's own ``model_type`` picks the class (the plain stand-in above for
#: ``intern_vit_6b``, transformers' class for ``qwen2``); every other key is stored as given
REMOTE_COMPOSITES = {
    "internvl_chat": ("vision_config", "llm_config"),
    # NVLM-D's NVLM_D_Config subclasses InternVLChatConfig (configuration_nvlm_d.py)
    "NVLM_D": ("vision_config", "llm_config"),
    # H2OVL's H2OVLChatConfig (configuration_h2ovl_chat.py) is InternVL chat's, a Llama text
    "h2ovl_chat": ("vision_config", "llm_config"),
}


def register() -> None:
    from transformers import AutoConfig, PretrainedConfig

    for model_type in REMOTE_MODEL_TYPES:
        try:
            AutoConfig.for_model(model_type)
            continue  # a class exists: use it
        except (ValueError, KeyError):
            pass
        standin = type(
            f"RemoteStandin_{model_type}", (PretrainedConfig,), {"model_type": model_type}
        )
        AutoConfig.register(model_type, standin)
    for model_type, keys in REMOTE_COMPOSITES.items():
        AutoConfig.register(model_type, _composite(model_type, keys))


def _composite(model_type: str, keys: tuple[str, ...]) -> type:
    from transformers import AutoConfig, PretrainedConfig

    def __init__(self, **kwargs):  # noqa: N807
        subs = {k: kwargs.pop(k, None) for k in keys}
        PretrainedConfig.__init__(self, **kwargs)
        for key, sub in subs.items():
            if isinstance(sub, dict):
                sub = dict(sub)
                sub = AutoConfig.for_model(sub.pop("model_type"), **sub)
            setattr(self, key, sub)

    return type(
        f"RemoteComposite_{model_type}",
        (PretrainedConfig,),
        {"model_type": model_type, "__init__": __init__, "sub_configs": {}},
    )


if __name__ == "__main__":
    register()
    if sys.argv[1:2] == ["--probe"]:
        import runpy

        probe = os.path.join(os.environ["VLLM_REFERENCE"], "deploy_probe.py")
        sys.argv = [probe, *sys.argv[2:]]
        runpy.run_path(probe, run_name="__main__")
        sys.exit(0)
    # the batch mode runs each config in a child process of ``vr.__file__``: this script, so the
    # children register the stand-ins too
    vr.__file__ = os.path.abspath(__file__)
    vr.main()
