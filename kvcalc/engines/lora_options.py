"""The LoRA settings of a deployment, as plain values (vLLM ``--enable-lora --max-loras
--max-lora-rank --max-cpu-loras --fully-sharded-loras --lora-dtype``; SGLang's ``--enable-lora
--max-loras-per-batch --max-lora-rank --max-loaded-loras --lora-target-modules`` read the same
settings, with SGLang's own defaults). Each engine sizes the adapter slots itself
(:mod:`kvcalc.engines.vllm.lora`, :mod:`kvcalc.engines.sglang.lora`). Pure."""

from __future__ import annotations

from kvcalc.errors import InputError
from kvcalc.frozen import frozen

#: vLLM 0.33's ``MaxLoRARanks`` (``config/lora.py``: ``Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]``)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: vLLM's ``lora_dtype`` choices (``LoRADType``); ``auto`` = the model's dtype
LORA_DTYPES = ("auto", "float16", "bfloat16")


@frozen
class LoraOptions:
    """Adapter slots on the GPU: ``max_loras`` of rank ``max_lora_rank`` each."""

    max_loras: int = 1
    max_lora_rank: int = 16
    #: adapters kept in host memory (None: ``max_loras``, vLLM's default)
    max_cpu_loras: int | None = None
    fully_sharded_loras: bool = False
    #: ``auto`` (the model's dtype), ``float16`` or ``bfloat16``
    lora_dtype: str = "auto"
    #: ``max_loras`` / ``max_lora_rank`` as given (None: not given; the fields above then hold
    #: vLLM's defaults, and SGLang applies its own: 8 slots, no default rank)
    asked_max_loras: int | None = None
    asked_max_lora_rank: int | None = None
    #: SGLang's ``--lora-target-modules`` (None: not given); vLLM's planner refuses it
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("max_loras", "max_lora_rank"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be a positive integer, got {value!r}",
                                 code="invalid-input")  # fmt: skip
        cpu = self.max_cpu_loras
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 1):
            raise InputError(f"max_cpu_loras must be a positive integer, got {cpu!r}",
                             code="invalid-input")  # fmt: skip
        low = str(self.lora_dtype).strip().lower()
        if low not in LORA_DTYPES:
            raise InputError(f"lora_dtype {self.lora_dtype!r} is not one vLLM takes",
                             hint="choose from: " + ", ".join(LORA_DTYPES), code="invalid-input")  # fmt: skip
        object.__setattr__(self, "lora_dtype", low)

    @property
    def cpu_loras(self) -> int:
        """Adapters in host memory (``max_cpu_loras``, default ``max_loras``)."""
        return self.max_cpu_loras if self.max_cpu_loras is not None else self.max_loras
