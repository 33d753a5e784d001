"""GPU prices per hour for ``kvcalc recommend``: a table read from YAML or CSV text (pure).

The bundled table (``kvcalc/data/prices.yaml``) names its date and source; a file given with
``--prices`` (or ``KVCALC_PRICES``) replaces it. Accepted forms:

- YAML: the bundled form (``date``, ``source``, ``usd_per_gpu_hour: {GPU: price}``), a flat mapping
  ``{GPU: price}``, or a list of ``{gpu: GPU, usd_per_hour: price}``;
- CSV: a header ``gpu,usd_per_hour`` and one row per GPU.

GPU names are the catalog's (any alias, any case). A price is a finite number above 0; a GPU
written twice, a name the catalog does not know or a value that is not a price is refused
(``invalid-prices``), naming the file and the entry.
"""

from __future__ import annotations

import csv
import math
from dataclasses import field
from typing import Any

from kvcalc.errors import InputError
from kvcalc.frozen import frozen
from kvcalc.model.gpus import get_gpu

CODE = "invalid-prices"
_HINT = ("write `GPU: usd_per_hour` pairs (YAML) or a CSV with the header gpu,usd_per_hour; GPU "
         "names as `kvcalc gpus` lists them")  # fmt: skip


@frozen
class PriceTable:
    """US dollars per GPU-hour by catalog GPU name; a GPU not in it has no known price."""

    #: catalog name → USD per GPU-hour
    usd_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    #: the day the prices were listed (None: the file gave none)
    date: str | None = None
    #: where they come from (the bundled table's provider, or the file given)
    source: str = ""

    def price(self, gpu: str) -> float | None:
        return self.usd_per_gpu_hour.get(get_gpu(gpu).name)

    @property
    def label(self) -> str:
        """How the output names these prices: source and date (never a price without its date)."""
        when = f"listed {self.date}" if self.date else "undated"
        return f"{self.source} ({when})"


def _fail(origin: str, what: str) -> InputError:
    return InputError(f"prices {origin}: {what}", hint=_HINT, code=CODE)


def _price(origin: str, gpu: Any, value: Any) -> tuple[str, float]:
    if not isinstance(gpu, str) or not gpu.strip():
        raise _fail(origin, f"a GPU name must be text, got {gpu!r}")
    try:
        name = get_gpu(gpu).name
    except InputError as exc:
        raise InputError(
            f"prices {origin}: unknown GPU {gpu!r}", hint=exc.hint, code=CODE
        ) from None
    if isinstance(value, str):
        try:
            value = float(value.strip().lstrip("$"))
        except ValueError:
            raise _fail(origin, f"{gpu}: {value!r} is not a number of dollars per hour") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(origin, f"{gpu}: {value!r} is not a number of dollars per hour")
    if not math.isfinite(value) or value <= 0:
        raise _fail(origin, f"{gpu}: a price must be a finite number above 0, got {value}")
    return name, float(value)


def _collect(origin: str, pairs: list[tuple[Any, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for gpu, value in pairs:
        name, price = _price(origin, gpu, value)
        if name in out:
            raise _fail(origin, f"{name} is priced twice ({gpu!r})")
        out[name] = price
    if not out:
        raise _fail(origin, "no prices in it")
    return out


def parse_prices(text: str, *, origin: str, is_csv: bool = False) -> PriceTable:
    """The table ``text`` holds (``origin`` names it in errors and in the output)."""
    if is_csv:
        return PriceTable(usd_per_gpu_hour=_csv_pairs(text, origin), source=origin)
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise _fail(origin, f"not valid YAML{where}") from None
    date, source = None, origin
    if isinstance(data, dict) and "usd_per_gpu_hour" in data:
        unknown = sorted(set(data) - {"date", "source", "currency", "usd_per_gpu_hour"})
        if unknown:
            raise _fail(origin, f"unknown key {unknown[0]!r}")
        if data.get("currency", "USD") != "USD":
            raise _fail(origin, f"currency {data['currency']!r}: prices are in USD")
        date = None if data.get("date") is None else str(data["date"])
        source = str(data.get("source") or origin)
        data = data["usd_per_gpu_hour"]
    if isinstance(data, dict):
        pairs = list(data.items())
    elif isinstance(data, list):
        pairs = []
        for row in data:
            if not isinstance(row, dict) or set(row) != {"gpu", "usd_per_hour"}:
                raise _fail(origin, f"each entry needs exactly gpu and usd_per_hour, got {row!r}")
            pairs.append((row["gpu"], row["usd_per_hour"]))
    else:
        raise _fail(origin, "expected a mapping of GPU to usd_per_hour, or a list of entries")
    return PriceTable(usd_per_gpu_hour=_collect(origin, pairs), date=date, source=source)


def _csv_pairs(text: str, origin: str) -> dict[str, float]:
    rows = [r for r in csv.reader(text.splitlines()) if r and any(c.strip() for c in r)]
    if not rows or [c.strip().lower() for c in rows[0]] != ["gpu", "usd_per_hour"]:
        raise _fail(origin, "the first line must be the header gpu,usd_per_hour")
    pairs = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 2:
            raise _fail(origin, f"row {number}: expected 2 columns, got {len(row)}")
        pairs.append((row[0].strip(), row[1].strip()))
    return _collect(origin, pairs)
