"""Deployment files for ``kvcalc check``: read with line numbers, validated, planned and judged.

- :mod:`kvcalc.deploy.yamlread`: YAML → nodes with line/column (safe_load semantics, bounded;
  the nodes and limits in :mod:`kvcalc.deploy.yamlnodes`, the event walk in
  :mod:`kvcalc.deploy.yamlbuild`);
- :mod:`kvcalc.deploy.keys`: the one table of keys (validator and JSON Schema both read it; the
  keys that are settings come from :mod:`kvcalc.planning.settings`), read by
  :mod:`kvcalc.deploy.values`;
- :mod:`kvcalc.deploy.spec`: nodes → :class:`Deployment` values (:mod:`kvcalc.deploy.deployment`),
  or every :class:`Problem`;
- :mod:`kvcalc.deploy.judge`: a plan against the requirements → :class:`Failure` values;
- :mod:`kvcalc.deploy.schema`: the published JSON Schema;
- :mod:`kvcalc.deploy.run`: :func:`check_paths`, the whole check as one call.

>>> from kvcalc.deploy import check_paths  # doctest: +SKIP
>>> report = check_paths(["deploy/*.yaml"]); report.exit_code()  # doctest: +SKIP
"""

from __future__ import annotations

from kvcalc.deploy.judge import Failure, judge
from kvcalc.deploy.run import CheckReport, DeploymentResult, check_paths, expand_paths, read_file
from kvcalc.deploy.spec import Deployment, Problem, Requirements, parse_document

__all__ = [
    "CheckReport", "Deployment", "DeploymentResult", "Failure", "Problem", "Requirements",
    "check_paths", "expand_paths", "judge", "parse_document", "read_file",
]  # fmt: skip
