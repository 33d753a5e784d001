"""The command-line interface: typer commands that parse options, call one library function and render.

This layer owns the ``kvcalc`` app and its single error boundary (:mod:`~kvcalc.cli.app`), the
options generated from the one table of settings (:mod:`~kvcalc.cli.options`, from
:mod:`kvcalc.planning.settings`; :mod:`~kvcalc.cli.plan_args` turns them into ``PlanInputs``) and
one ``cmd_*`` module per command. It does no arithmetic and reads no files itself: every figure
comes from :mod:`kvcalc.planning`, :mod:`kvcalc.deploy` or :mod:`kvcalc.verify`, and every byte
written goes through :mod:`kvcalc.render`.
"""
