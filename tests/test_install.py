"""kvcalc is not on the package index: every install it suggests names a checkout or its repository.

``pip install kvcalc`` (or ``'kvcalc[verify]'``) finds nothing, so an error hint, a help text or a
page that says so sends people nowhere. The hint text is built in one place,
:func:`kvcalc.errors.install_hint`, from :data:`kvcalc.errors.REPOSITORY_URL`.
"""

from __future__ import annotations

import re
from pathlib import Path

from kvcalc.errors import REPOSITORY_URL, install_hint

ROOT = Path(__file__).resolve().parent.parent
#: ``pip install kvcalc`` / ``'kvcalc[x]'`` / ``"kvcalc[x]"`` not followed by `` @ <url>``
FROM_THE_INDEX = re.compile(r"""pip install ['"]?kvcalc(?:\[[\w,]+\])?(?![\w\[])['"]?(?!\s*@)""")


def _texts():
    paths = [*sorted((ROOT / "kvcalc").rglob("*.py")), *sorted((ROOT / "docs").glob("*.md")),
             ROOT / "README.md"]  # fmt: skip
    for path in paths:
        yield path.relative_to(ROOT), path.read_text(encoding="utf-8")


def test_no_install_from_the_package_index_is_suggested():
    found = [
        f"{path}: {m.group(0)}" for path, text in _texts() for m in FROM_THE_INDEX.finditer(text)
    ]
    assert found == []


def test_the_checker_sees_an_index_install():
    assert FROM_THE_INDEX.search("hint: pip install 'kvcalc[verify]'")
    assert FROM_THE_INDEX.search("run: pip install kvcalc\n")
    assert not FROM_THE_INDEX.search(f'pip install "kvcalc[verify] @ git+{REPOSITORY_URL}"')
    assert not FROM_THE_INDEX.search('pip install ".[verify]"')


def test_the_hint_installs_from_a_checkout_or_the_repository():
    assert install_hint("verify") == (
        'pip install ".[verify]" in a kvcalc checkout, or '
        'pip install "kvcalc[verify] @ git+https://github.com/OWNER/kvcalc"'
    )
    assert install_hint() == (
        'pip install . in a kvcalc checkout, or pip install "kvcalc @ git+https://github.com/OWNER/kvcalc"'
    )


def test_every_repository_address_shown_is_the_one_constant():
    addresses = {
        m.group(0).rstrip(".")
        for _, text in _texts()
        for m in re.finditer(r"https://github\.com/[\w.-]+/kvcalc\b", text)
    }
    assert addresses == {REPOSITORY_URL}


def test_the_readme_states_the_cmake_args_ci_builds_llama_cpp_with():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (flags,) = re.findall(r'export CMAKE_ARGS="\$\{CMAKE_ARGS:-(.*?)\}"', ci)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f'export CMAKE_ARGS="{flags}"' in readme


def test_the_readme_says_where_the_cpu_torch_comes_from():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme
