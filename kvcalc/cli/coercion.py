"""Option values without a pydantic adapter per option: most of ``kvcalc plan``'s start-up.

typer (0.2x with its own click) converts every parameter's value through a pydantic
``TypeAdapter`` built on first use — for an option left out too, whose value is ``None`` and stays
``None``. For ``plan`` that meant importing pydantic (and, through its plugin loader,
``importlib.metadata``) and building some thirty adapters, about as long as the plan itself took
with rendering. kvcalc's options mostly parse their own values: a setting's parser from the table
(:mod:`kvcalc.planning.settings`), which raises kvcalc's own errors, or plain text.

:class:`Command` (the class of every command :func:`kvcalc.cli.options.command` registers) gives
each such parameter a conversion that does what typer's adapter does for it, without pydantic:

- a value left out (``None``) stays ``None`` (``()`` for a repeatable option), as typer returns,
  whatever the parameter's type;
- a parameter with a ``parser``: ``parser(value)``, per item for a repeatable option;
- a ``str`` parameter: the text itself (typer's adapter returns a ``str`` unchanged).

Anything else goes to typer's own conversion, built as typer builds it: other types (numbers,
enums, paths, files), values that are not text, and a parser that raises ``ValueError`` or
``AssertionError`` (pydantic turns those into typer's usage error, so typer's conversion runs the
parser again and words the error as typer does). Where typer has no such per-parameter
conversion (older typer on click), nothing is changed.
"""

from __future__ import annotations

from typing import Any, get_args, get_origin

import typer.core

#: "no fast answer: ask typer's own conversion"
_TYPER = object()


class _OwnConversion:
    """The conversion of one parameter: the cases above here, the rest through typer's own."""

    def __init__(self, parser: Any, multi: bool, text: bool) -> None:
        self.parser = parser
        self.multi = multi
        self.text = text
        self.typer_conversion: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        answer = self._fast(value)
        if answer is not _TYPER:
            return answer
        if self.typer_conversion is None:
            param._runtime_param = None  # typer builds its own on the next ask
            try:
                self.typer_conversion = param.get_runtime_param()
            finally:
                param._runtime_param = self
        return self.typer_conversion.coerce(value, param=param, ctx=ctx)

    def _fast(self, value: Any) -> Any:
        if not self.multi:
            return self._one(value)
        if not isinstance(value, (list, tuple)):
            return _TYPER  # typer's error (a text given to a repeatable option) or wrapping
        items = [self._one(item) for item in value]
        return _TYPER if any(item is _TYPER for item in items) else items

    def _one(self, value: Any) -> Any:
        if self.parser is None:
            return value if self.text and type(value) is str else _TYPER
        try:
            return self.parser(value)
        except (ValueError, AssertionError):
            return _TYPER


def _own_conversion(param: Any) -> _OwnConversion | None:
    """The conversion for ``param``, or None where typer's own is the only one that fits."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", _TYPER) is not None:
        return None  # not typer's per-parameter conversion, or one already built
    if getattr(descriptor, "file_annotation", None) is not None:
        return None
    annotation = descriptor.annotation
    multi = get_origin(annotation) is list
    if multi:
        (annotation,) = get_args(annotation)
    parser = getattr(descriptor.parameter_info, "parser", None)
    return _OwnConversion(parser, multi, text=annotation is str)


def _install(params: list[Any]) -> list[Any]:
    for param in params:
        conversion = _own_conversion(param)
        if conversion is not None:
            param._runtime_param = conversion
    return params


class Command(typer.core.TyperCommand):
    """typer's command, its parameters converted by :class:`_OwnConversion` where it fits."""

    def get_params(self, ctx: Any) -> list[Any]:  # with click's -h/--help, added here
        return _install(super().get_params(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help page, the engine settings' lists filled in first (only a help page needs
        every engine)."""
        from kvcalc.cli.engine_help import fill

        fill(self.get_params(ctx))
        super().format_help(ctx, formatter)


class Group(typer.core.TyperGroup):
    """typer's group (``kvcalc`` itself: ``--version``, ``--help``), converted the same way."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _install(super().get_params(ctx))
