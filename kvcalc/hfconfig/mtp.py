"""The MTP layers of a checkpoint as vLLM 0.33 builds them for ``method: mtp``
(:class:`~kvcalc.model.mtp.MtpLayers`).

From ``vllm/config/speculative.py`` ``SpeculativeConfig.hf_config_override`` (the draft config's
``model_type`` and ``n_predict``) and the draft model files:

- DeepSeek-V3 ``deepseek_v3``, DeepSeek-V3.2 ``deepseek_v32``, GLM-5 ``glm_moe_dsa`` →
  ``deepseek_mtp`` (``DeepSeekMTPModel`` / ``DeepseekV32MTPModel``), and GLM-4.5/4.6
  ``glm4_moe`` → ``Glm4MoeMTPModel`` (``glm4_moe_mtp.py``: the same ``enorm``, ``hnorm``,
  ``eh_proj`` and ``shared_head.norm`` around a ``Glm4MoeDecoderLayer``; GLM-4.7-Flash
  ``glm4_moe_lite`` → ``Glm4MoeLiteMTPModel``, the same around its MLA layer): ``n_predict =
  num_nextn_predict_layers``, that many decoder layers (``deepseek_mtp.py``: ``enorm``, ``hnorm``, a
  replicated ``nn.Linear`` ``eh_proj`` of 2·hidden → hidden, ``shared_head.norm``; the embedding and
  head are the target's), each the target's own layer: the same cache as the last target layer;
- Qwen3-Next ``qwen3_next`` → ``Qwen3NextMTP``: ``n_predict = num_nextn_predict_layers`` (absent in
  the published config: None), ``getattr(config, "num_nextn_predict_layers", 1)`` full-attention
  layers (``qwen3_next_mtp.py``: a column-parallel ``fc``, ``pre_fc_norm_hidden``,
  ``pre_fc_norm_embedding``, ``norm``);
- Qwen3.5 ``qwen3_5``/``qwen3_5_moe`` (and their ``_text`` types) → ``Qwen3_5MTP`` /
  ``Qwen3_5MoeMTP``: ``n_predict = mtp_num_hidden_layers``, that many full-attention layers (default
  1, ``qwen3_5_mtp.py``), the same ``fc`` and norms.

Every other model type gets ``None``: kvcalc does not model its MTP draft (vLLM refuses some, e.g.
Kimi-K2's ``kimi_k2``, which no override maps to an MTP architecture).
"""

from __future__ import annotations

from kvcalc.hfconfig.reader import ConfigReader
from kvcalc.model.drafts import MtpLayers
from kvcalc.model.layouts import LayerKind, Layout

_DEEPSEEK = {"deepseek_v3": "DeepSeekMTPModel", "deepseek_v32": "DeepseekV32MTPModel",
             "glm_moe_dsa": "DeepseekV32MTPModel", "glm4_moe": "Glm4MoeMTPModel",
             "glm4_moe_lite": "Glm4MoeLiteMTPModel"}  # fmt: skip
_QWEN35 = {"qwen3_5": "Qwen3_5MTP", "qwen3_5_text": "Qwen3_5MTP", "qwen3_5_moe": "Qwen3_5MoeMTP",
           "qwen3_5_moe_text": "Qwen3_5MoeMTP"}  # fmt: skip


def read_mtp(r: ConfigReader, model_type: str, layouts: list[Layout]) -> MtpLayers | None:
    """The MTP draft vLLM builds for this config, or None where kvcalc does not model one."""
    if not layouts:
        return None
    if model_type in _DEEPSEEK:
        n = r.int("num_nextn_predict_layers", default=None, minimum=0)
        count = n or 0
        return MtpLayers(n_predict=n, layers=(layouts[-1],) * count, key="num_nextn_predict_layers",
                         architecture=_DEEPSEEK[model_type], template_layer=len(layouts) - 1)  # fmt: skip
    full = [i for i, x in enumerate(layouts) if x.kind is LayerKind.FULL]
    if model_type == "qwen3_next" and full:
        n = r.int("num_nextn_predict_layers", default=None, minimum=0)
        count = 1 if n is None else n
        return MtpLayers(n_predict=n, layers=(layouts[full[0]],) * count,
                         key="num_nextn_predict_layers", architecture="Qwen3NextMTP",
                         projection="fc", template_layer=full[0])  # fmt: skip
    if model_type in _QWEN35 and full:
        n = r.int("mtp_num_hidden_layers", default=None, minimum=0)
        count = 1 if n is None else n
        return MtpLayers(n_predict=n, layers=(layouts[full[0]],) * count,
                         key="mtp_num_hidden_layers", architecture=_QWEN35[model_type],
                         projection="fc", template_layer=full[0])  # fmt: skip
    return None
