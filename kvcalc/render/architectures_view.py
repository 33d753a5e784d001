"""``kvcalc models --architectures``: counts per category, then one line per architecture (80
columns: name, status, family or reason, engines that plan it)."""

from __future__ import annotations

import textwrap

from kvcalc.render.console import stdout_console

WIDTH = 80


def _say(console, text: str, indent: str = "", rest: str = "    ") -> None:
    for line in textwrap.wrap(text, WIDTH - 1, initial_indent=indent, subsequent_indent=rest,
                              break_on_hyphens=False):  # fmt: skip
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def render(listing) -> None:
    console = stdout_console()
    counts = ", ".join(f"{c.category} {c.exact} of {c.total}" for c in listing.counts)
    _say(console, f"vLLM {listing.engine_version}'s registry, exact in kvcalc: {counts}", rest="  ")
    for count in listing.counts:
        rows = [r for r in listing.rows if r.category == count.category]
        console.print("")
        console.print(f"{count.category} ({count.exact} of {count.total} exact)", highlight=False)
        by_reason: dict[tuple[str, str], list[str]] = {}
        for r in rows:
            if r.status != "exact":
                name = (
                    f"{r.architecture} ({r.config_source})" if r.config_source else r.architecture
                )
                by_reason.setdefault((r.status, r.reason), []).append(name)
                continue
            text = f"{r.architecture}: exact, family {r.family}"
            if r.example:
                text += f" (bundled: {r.example})"
            if r.engines:
                planned = [e.engine for e in r.engines if e.status == "planned"]
                refused = [e.engine for e in r.engines if e.status != "planned"]
                text += f"; planned by {', '.join(planned) or 'none'}"
                if refused:
                    text += f", refused by {', '.join(refused)}"
            _say(console, text, indent="  ")
        for (status, reason), names in by_reason.items():
            _say(console, f"{status} ({len(names)}): {reason}:", indent="  ")
            _say(console, ", ".join(names), indent="    ", rest="    ")
