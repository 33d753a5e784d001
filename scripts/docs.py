"""Regenerate every command output and figure shown in README.md and docs/*.md, cog-style.

    python scripts/docs.py --check     # exit 1 naming each stale block (tests/test_docs_generated.py)
    python scripts/docs.py --write     # rewrite the stale blocks in place

Two markers, both HTML comments, so the rendered page shows only the output:

* a **block**: a marker line, then a fenced code block that docs.py owns. The block becomes
  ``$ COMMAND`` and what the command printed (stdout, then stderr), as a user piping it would see
  it (80 columns, no colour, offline)::

      <!-- docs.py: kvcalc plan llama-3.1-8b --gpu H100-80GB -->
      ```console
      $ kvcalc plan llama-3.1-8b --gpu H100-80GB
      ...
      ```

  The command is ``kvcalc ...`` or ``python bench/NAME.py ...`` (a script of the checkout, run
  with ``runpy``). It may end in shell-style filters applied to stdout: ``| grep PATTERN`` (``-E``,
  ``-v``), ``| head -n N``, ``| tail -n N``. It may continue over lines with ``\\``. A command
  that exits 2 (could not run) is an error unless the marker starts with ``exit=2``;
  ``cwd=DIR`` runs it in that folder of the checkout (default: its root), ``needs=MODULE`` marks
  one that needs an extra (left unchecked without it).

* a **table** (or any Markdown) that a function of this script writes from real runs and the
  code: ``<!-- docs.py: table NAME -->``, the text, ``<!-- /docs.py -->`` (:data:`TABLES`).

* a **figure** in prose: ``<!-- docs.py: FORMAT from NAME -->VALUE<!-- /docs.py -->``, VALUE
  being ``FORMAT.format_map(json)`` of the ``--json`` output of the command the page names
  ``NAME`` on a line of its own, ``<!-- docs.py: let NAME = kvcalc ... --json -->`` (an inline
  comment cannot hold ``--``: Markdown would show it); ``{max_concurrency:.2f}``,
  ``{rows[0][max_concurrency]:.2f}``, ``{weights_bytes:size}`` (bytes as the tables print them:
  ``14.99 GiB``). Without ``from NAME``, FORMAT reads the figures computed
  from the code (:func:`figures`: ``{error_codes}``, ``{fuzz_cli_cases:,}``, ...).

Every command runs in this process (one import of kvcalc, one model cache), through
``kvcalc.cli.app.main`` with its real error boundary.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: the environment every command runs in: what the golden tests use (tests/conftest.py)
ENV = {"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb", "HF_HUB_OFFLINE": "1"}
UNSET = ("KVCALC_DEBUG", "FORCE_COLOR", "HF_TOKEN")

BLOCK = re.compile(
    r"(?P<marker>^<!-- docs\.py: (?P<command>(?!let )(?:(?!-->).)+?) -->\n)"
    r"(?P<fence>```[a-z]*\n)(?P<body>.*?)^```$",
    re.M | re.S,
)
LET = re.compile(
    r"^<!-- docs\.py: let (?P<name>[\w-]+) = (?P<command>(?:(?!-->).)+?) -->$", re.M | re.S
)
TABLE = re.compile(
    r"(?P<marker>^<!-- docs\.py: table (?P<name>\w+) -->\n)(?P<body>.*?)^<!-- /docs\.py -->$",
    re.M | re.S,
)
FIGURE = re.compile(
    r"(?<!`)<!-- docs\.py: (?P<spec>[^>]+?) -->(?P<value>[^<\n]*)<!-- /docs\.py -->"
)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(folder: Path | None = None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in (*ENV, *UNSET)}
    cwd = os.getcwd()
    os.environ.update(ENV)
    for key in UNSET:
        os.environ.pop(key, None)
    os.chdir(folder or ROOT)  # example files are named from the checkout's root
    try:
        yield
    finally:
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_RUNS: dict[tuple[str, ...], Run] = {}

#: files a shown command reads that docs.py writes first, into a temporary folder the command
#: then runs in: name -> the script that writes it (run as ``python SCRIPT NAME``)
GENERATED = {"Qwen3-8B-Q4_K_M.gguf": "scripts/example_gguf.py"}
_FILES: list[Path] = []


def _generated_folder(argv: list[str]) -> Path | None:
    names = [a for a in argv if a in GENERATED]
    if not names:
        return None
    if not _FILES:
        import atexit
        import shutil
        import tempfile

        _FILES.append(Path(tempfile.mkdtemp(prefix="kvcalc-docs-")))
        atexit.register(shutil.rmtree, _FILES[0], ignore_errors=True)
    folder = _FILES[0]
    for name in names:
        if not (folder / name).exists():
            import runpy

            script = runpy.run_path(str(ROOT / GENERATED[name]))
            script["write"](folder / name)
    return folder


def run_kvcalc(argv: list[str], cwd: str = ".", program: str = "kvcalc") -> Run:
    """``kvcalc ARGV`` (or ``python SCRIPT ARGV``, a script of the checkout) in this process, in
    ``cwd`` (relative to the checkout), captured (cached: a page may show one run twice)."""
    key = (program, cwd, *argv)
    if key not in _RUNS:
        out, err = io.StringIO(), io.StringIO()
        folder = _generated_folder(argv) or (ROOT / cwd)
        with _environment(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                _call(program, argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        _RUNS[key] = Run(code, out.getvalue(), err.getvalue())
    return _RUNS[key]


def _call(program: str, argv: list[str]) -> None:
    if program == "kvcalc":
        from kvcalc.cli.app import main

        main(argv)
        return
    import runpy

    saved = sys.argv
    sys.argv = argv
    try:
        runpy.run_path(str(ROOT / argv[0]), run_name="__main__")
    finally:
        sys.argv = saved


def _grep(args: list[str]) -> Callable[[list[str]], list[str]]:
    invert = "-v" in args
    words = [a for a in args if a not in ("-E", "-v")]
    if len(words) != 1:
        raise ValueError(f"grep takes one pattern, got {args}")
    pattern = re.compile(words[0])
    return lambda lines: [line for line in lines if bool(pattern.search(line)) != invert]


def _count(args: list[str]) -> int:
    if len(args) == 2 and args[0] == "-n":
        return int(args[1])
    raise ValueError(f"expected -n N, got {args}")


@dataclass(frozen=True)
class Command:
    argv: list[str]
    filters: list[Callable[[list[str]], list[str]]]
    #: the exit code the marker expects (None: 0 or 1)
    exit_code: int | None
    #: modules the command needs (an extra): without them the block is left unchecked
    needs: tuple[str, ...]
    #: the folder it runs in, relative to the checkout's root
    cwd: str = "."
    #: ``kvcalc``, or ``python`` for a script of the checkout (``bench/accuracy.py``)
    program: str = "kvcalc"

    def missing(self) -> list[str]:
        import importlib.util

        return [m for m in self.needs if importlib.util.find_spec(m) is None]


def parse(command: str) -> Command:
    """``[exit=N] [needs=MODULE] [cwd=DIR] kvcalc ARGS [| FILTER ...]``"""
    text = command.replace("\\\n", " ")
    options: dict[str, str] = {}
    while re.match(r"(exit|needs|cwd)=", text):
        head, text = text.split(None, 1)
        key, value = head.split("=", 1)
        options[key] = value
    stages = [shlex.split(stage) for stage in _split_pipes(text)]
    program = stages[0][0] if stages[0] else ""
    if program not in ("kvcalc", "python") or (
        program == "python"
        and (len(stages[0]) < 2 or not re.fullmatch(r"(bench|scripts)/\w+\.py", stages[0][1]))
    ):
        raise ValueError(f"a docs.py command is kvcalc or python bench/NAME.py: {command!r}")
    filters: list[Callable[[list[str]], list[str]]] = []
    for stage in stages[1:]:
        name, args = stage[0], stage[1:]
        if name == "grep":
            filters.append(_grep(args))
        elif name == "head":
            n = _count(args)
            filters.append(lambda lines, n=n: lines[:n])
        elif name == "tail":
            n = _count(args)
            filters.append(lambda lines, n=n: lines[-n:])
        else:
            raise ValueError(f"unknown filter {name!r} in {command!r} (grep, head, tail)")
    exit_code = int(options["exit"]) if "exit" in options else None
    needs = tuple(options["needs"].split(",")) if "needs" in options else ()
    cwd = options.get("cwd", ".")
    return Command(stages[0][1:], filters, exit_code, needs, cwd, program)


def _split_pipes(text: str) -> list[str]:
    """Split on ``|`` outside quotes (a grep pattern may hold one)."""
    parts, current, quote = [], "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "|":
            parts.append(current)
            current = ""
            continue
        current += char
    return [*parts, current]


def block_text(command: str) -> str:
    parsed = parse(command)
    result = run_kvcalc(parsed.argv, parsed.cwd, parsed.program)
    expected = parsed.exit_code
    if expected is not None and result.exit_code != expected:
        raise RuntimeError(f"{command!r} exited {result.exit_code}, the marker says {expected}")
    if expected is None and result.exit_code not in (0, 1):
        raise RuntimeError(
            f"{command!r} exited {result.exit_code}:\n{result.stdout}{result.stderr}"
        )
    lines = result.stdout.splitlines()
    for keep in parsed.filters:
        lines = keep(lines)
    lines += result.stderr.splitlines()
    shown = [f"$ {shown_command(command)}", *lines]
    text = "\n".join(line.rstrip() for line in shown) + "\n"
    if "```" in text:
        raise RuntimeError(f"{command!r} printed a code fence")
    return text


def shown_command(command: str) -> str:
    """The command as the block shows it: without docs.py's own options."""
    return re.sub(r"^(?:(?:exit|needs|cwd)=\S+\s+)+", "", command)


# --- figures computed from the code -----------------------------------------------------------


def error_codes() -> int:
    """The codes kvcalc can print: every ``code = "..."`` in the source (the scan
    ``tests/test_errors_catalogue.py`` holds docs/errors.md to), with the CLI boundary's own."""
    pattern = re.compile(r"\bcode\s*=\s*\"([a-z0-9-]+)\"", re.IGNORECASE)
    found = {"usage", "internal"}
    for path in (ROOT / "kvcalc").rglob("*.py"):
        found |= set(pattern.findall(path.read_text(encoding="utf-8")))
    return len(found - {"error"})


def _cases_per_run(module: str, test: str) -> int:
    """Examples one run of a test draws: hypothesis's ``max_examples`` (1 without ``@given``)
    times every ``parametrize`` list."""
    import importlib

    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    function = getattr(importlib.import_module(module), test)
    count = 1
    for mark in getattr(function, "pytestmark", []):
        if mark.name == "parametrize":
            count *= len(mark.args[1])
    settings = getattr(function, "_hypothesis_internal_use_settings", None)
    return count * (settings.max_examples if settings is not None else 1)


#: the fuzz tests of the real command line (docs/reliability.md's fuzz table); True: the test
#: existed before the reliability work (the page keeps the two apart)
FUZZ_CLI = {
    "test_cli_fuzz_config::test_any_config_through_every_command": False,
    "test_cli_fuzz_config::test_hostile_config_files": False,
    "test_cli_fuzz_config::test_mutated_config_through_cli": True,
    "test_cli_fuzz_config::test_random_bytes_as_config": True,
    "test_cli_fuzz_args::test_any_option_values": False,
    "test_cli_fuzz_args::test_any_argument_list": False,
    "test_cli_fuzz_args::test_inputs_that_crashed_before": False,
    "test_verify_pure::test_hostile_calibration_files": False,
    "test_deploy_props::test_hostile_generated_documents": False,
    "test_deploy_props::test_hostile_deployment_files": False,
    "test_deploy_props::test_mutated_files_never_crash_and_every_problem_has_a_line": True,
    "test_safetensors_meta::test_hostile_checkpoints_through_inspect": False,
}
#: the library-level property tests
FUZZ_LIBRARY = (
    "test_properties::test_mutated_configs_parse_or_fail_cleanly",
    "test_deploy_props::test_whatever_the_validator_accepts_the_schema_accepts",
    "test_safetensors_meta::test_totals_add_up_for_any_header",
)


class _Cases(dict):
    """``cases["module::test"]``: the cases one run of that test draws; ``cases["module"]``:
    those of every test in the module."""

    def __missing__(self, key: str) -> int:
        import importlib

        tests = str(ROOT / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        module, _, test = key.partition("::")
        loaded = importlib.import_module(module)
        names = [test] if test else [n for n in vars(loaded) if n.startswith("test_")]
        self[key] = sum(_cases_per_run(module, name) for name in names)
        return self[key]


_FIGURES: dict[str, Any] = {}


def figures() -> dict[str, Any]:
    """What a figure without ``from COMMAND`` reads: counts computed from the code and tests."""
    if not _FIGURES:
        cases = _Cases()
        before = sum(cases[t] for t, old in FUZZ_CLI.items() if old)
        total = sum(cases[t] for t in FUZZ_CLI)
        _FIGURES.update(
            error_codes=error_codes(),
            cases=cases,
            fuzz_cli_cases=total,
            fuzz_cli_cases_new=total - before,
            fuzz_cli_cases_before=before,
            fuzz_library_cases=sum(cases[t] for t in FUZZ_LIBRARY),
            seed=seed_figures(),
        )
    return _FIGURES


class _Int(int):
    """A JSON integer: ``{x:size}`` formats bytes as kvcalc's tables do (``2.50 GiB``)."""

    def __new__(cls, text: str) -> _Int:
        return super().__new__(cls, int(text))

    def __format__(self, spec: str) -> str:
        if spec == "size":
            from kvcalc.render.fmt import size

            return size(self)
        return int.__format__(self, spec)


class _Float(float):
    def __new__(cls, text: str) -> _Float:
        return super().__new__(cls, float(text))

    def __format__(self, spec: str) -> str:
        if spec == "size":
            from kvcalc.render.fmt import size

            return size(self)
        return float.__format__(self, spec)


def figure_text(spec: str, commands: dict[str, str] | None = None) -> str:
    """``FORMAT from NAME`` (a ``let NAME = COMMAND`` of the page) or ``FORMAT`` (:func:`figures`)."""
    if " from " in spec:
        fmt, name = spec.split(" from ", 1)
        if name not in (commands or {}):
            raise ValueError(f"{spec!r}: no `<!-- docs.py: let {name} = COMMAND -->` on the page")
        parsed = parse((commands or {})[name])
        if parsed.filters:
            raise ValueError(f"a figure reads --json, without filters: {spec!r}")
        result = run_kvcalc(parsed.argv, parsed.cwd, parsed.program)
        if result.exit_code not in (0, 1):
            raise RuntimeError(f"{name!r} exited {result.exit_code}: {result.stderr}")
        data = json.loads(result.stdout, parse_int=_Int, parse_float=_Float)
    else:
        fmt, data = spec, figures()
    if isinstance(data, list):
        data = {"items": data}
    return fmt.format_map(data)


# --- tables ---------------------------------------------------------------------------------

#: the seed record (tests/fixtures/engine_logs.yaml, ``seed-qwen3-1.7b-8gb-gpu``): vLLM 0.31,
#: Qwen3-1.7B bf16, 512 + 128 tokens per request, decode tok/s by batch
SEED_MEASURED = {1: 66, 8: 383, 32: 831}
SEED_COMMAND = (
    "kvcalc throughput qwen3-1.7b --gpu-memory 8GiB --bandwidth {bandwidth} --tflops 30"
    " --max-model-len 4096 --prompt-len 512 --output-len 128 --batch 1 --batch 8 --batch 32 --json"
)


def _seed_ceilings() -> dict[str, dict[int, float]]:
    """kvcalc's decode ceiling (tok/s) for the seed record's batches, by bandwidth."""
    ceilings = {}
    for bandwidth in ("272GB/s", "448GB/s"):
        result = run_kvcalc(parse(SEED_COMMAND.format(bandwidth=bandwidth)).argv)
        points = json.loads(result.stdout)["points"]
        ceilings[bandwidth] = {p["batch"]: p["tokens_per_s"] for p in points}
    return ceilings


def seed_figures() -> dict[str, Any]:
    """What docs/throughput.md says of the seed record: measured / ceiling by batch at 272 and
    448 GB/s, and the bandwidth the batch-1 figure needs at least (tok/s × bytes per step)."""
    ceilings = _seed_ceilings()
    one = json.loads(run_kvcalc(parse(SEED_COMMAND.format(bandwidth="272GB/s")).argv).stdout)
    bytes_per_step = one["points"][0]["bytes_per_step"]
    return {
        "ratio_272": [SEED_MEASURED[b] / ceilings["272GB/s"][b] for b in SEED_MEASURED],
        "ratio_448": [SEED_MEASURED[b] / ceilings["448GB/s"][b] for b in SEED_MEASURED],
        "step_gb": bytes_per_step / 1e9,
        "needs_gbps": SEED_MEASURED[1] * bytes_per_step / 1e9,
    }


def seed_throughput() -> str:
    """The seed record's decode figures against kvcalc's ceiling at two bandwidths."""
    ceilings = _seed_ceilings()
    lines = [
        "| batch | measured | ceiling at 272 GB/s | measured / ceiling "
        "| ceiling at 448 GB/s | measured / ceiling |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for batch, measured in SEED_MEASURED.items():
        low, high = ceilings["272GB/s"][batch], ceilings["448GB/s"][batch]
        lines.append(
            f"| {batch} | {measured} | {low:,.1f} | **{measured / low:.2f}** "
            f"| {high:,.1f} | {measured / high:.2f} |"
        )
    return "\n".join(lines) + "\n"


def no_public_config() -> str:
    """The architectures of vLLM's registry with no public configuration found, and the counts of
    the others by where their configuration is (``kvcalc/data/architecture_configs.json``)."""
    from kvcalc.planning.architectures_refused import config_sources

    sources = config_sources()
    names = {"config-class": "a config class (transformers 5.20 or vLLM 0.33)",
             "published": "a published config.json", "unlocated": "named publicly, not located",
             "none": "no public configuration found"}  # fmt: skip
    lines = ["| vLLM table | " + " | ".join(names.values()) + " |", "|---|" + "---:|" * len(names)]
    for category in ("text-generation", "multimodal"):
        counts = [sum(e["category"] == category and e["source"] == s for e in sources.values())
                  for s in names]  # fmt: skip
        lines.append(f"| {category} | " + " | ".join(str(c) for c in counts) + " |")
    for source, text in (("none", "No public configuration found"),
                         ("unlocated", "Named publicly, no config.json located")):  # fmt: skip
        found = sorted(a for a, e in sources.items() if e["source"] == source)
        lines += ["", f"{text}: " + ", ".join(f"`{a}`" for a in found) + "."]
    return "\n".join(lines) + "\n"


TABLES: dict[str, Callable[[], str]] = {"seed_throughput": seed_throughput,
                                        "no_public_config": no_public_config}  # fmt: skip


# --- pages ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stale:
    page: Path
    line: int
    what: str


def regenerate(text: str, page: Path) -> tuple[str, list[Stale], list[Stale]]:
    """The page regenerated, the stale blocks and figures, the blocks left unchecked."""
    stale: list[Stale] = []
    unchecked: list[Stale] = []

    def line_of(offset: int) -> int:
        return text.count("\n", 0, offset) + 1

    def block(match: re.Match[str]) -> str:
        missing = parse(match["command"]).missing()
        if missing:
            unchecked.append(Stale(page, line_of(match.start()), f"needs {', '.join(missing)}"))
            return match.group(0)
        new = block_text(match["command"])
        if new != match["body"]:
            stale.append(Stale(page, line_of(match.start()), match["command"].split("\n")[0]))
        return match["marker"] + match["fence"] + new + "```"

    commands = {m["name"]: " ".join(m["command"].split()) for m in LET.finditer(text)}

    def figure(match: re.Match[str]) -> str:
        if "--" in match["spec"]:  # Markdown ends an inline comment there and shows the rest
            raise ValueError(f"{page.name}: {match['spec']!r}: name the command with a let line")
        new = figure_text(" ".join(match["spec"].split()), commands)
        if new != match["value"]:
            stale.append(Stale(page, line_of(match.start()), f"{match['spec']} = {new}"))
        return match.group(0).replace(f"-->{match['value']}<!--", f"-->{new}<!--")

    def table(match: re.Match[str]) -> str:
        new = TABLES[match["name"]]()
        if new != match["body"]:
            stale.append(Stale(page, line_of(match.start()), f"table {match['name']}"))
        return match["marker"] + new + "<!-- /docs.py -->"

    text = BLOCK.sub(block, text)
    text = TABLE.sub(table, text)
    text = FIGURE.sub(figure, text)
    return text, stale, unchecked


def unclosed_markers(text: str) -> list[int]:
    """Lines of block markers not followed by a fenced block (a typo would leave one unchecked)."""
    owned = {m.start() for pattern in (BLOCK, TABLE, LET) for m in pattern.finditer(text)}
    lines = []
    for match in re.finditer(r"^<!-- docs\.py: (?!.*<!-- /docs\.py -->)", text, re.M):
        if match.start() not in owned:
            lines.append(text.count("\n", 0, match.start()) + 1)
    return lines


def figures_starting_a_line(text: str) -> list[int]:
    """Lines that start with a figure: Markdown takes such a line for an HTML block, which ends
    the paragraph there (and shows the line raw)."""
    return [
        text.count("\n", 0, m.start()) + 1
        for m in re.finditer(r"^<!-- docs\.py: [^\n]*<!-- /docs\.py -->", text, re.M)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
    mode.add_argument("--write", action="store_true", help="rewrite stale blocks")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    stale: list[Stale] = []
    unchecked: list[Stale] = []
    problems = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        problems += [f"{page.relative_to(ROOT)}:{n}: marker without a fenced block"
                     for n in unclosed_markers(text)]  # fmt: skip
        problems += [f"{page.relative_to(ROOT)}:{n}: a figure starts the line (reflow it)"
                     for n in figures_starting_a_line(text)]  # fmt: skip
        new, found, skipped = regenerate(text, page)
        stale += found
        unchecked += skipped
        if args.write and new != text:
            page.write_text(new, encoding="utf-8")
    for line in problems:
        print(line, file=sys.stderr)
    for item in unchecked:
        print(
            f"{item.page.relative_to(ROOT)}:{item.line}: not checked: {item.what}", file=sys.stderr
        )
    seconds = time.perf_counter() - started
    verb = "rewrote" if args.write else "stale"
    for item in stale:
        print(f"{item.page.relative_to(ROOT)}:{item.line}: {verb}: {item.what}")
    print(f"docs.py: {len(_RUNS)} commands, {len(stale)} {verb}, {seconds:.1f} s", file=sys.stderr)
    if problems or (args.check and stale):
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
