"""The command-line interface: typer commands that parse options, call one library function and render.

This layer owns the ``kvcalc`` app and its single error boundary (:mod:`~kvcalc.cli.app`), the
options shared by commands (:mod:`~kvcalc.cli.options`, :mod:`~kvcalc.cli.plan_args`) and one
``cmd_*`` module per command group. It does no arithmetic and reads no files itself: every figure
comes from :mod:`kvcalc.planning`, :mod:`kvcalc.deploy` or :mod:`kvcalc.verify`, and every byte
written goes through :mod:`kvcalc.render`.
"""
