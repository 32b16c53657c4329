"""The reporter registry: (report kind, format name) -> renderer, shared by every command.

A *kind* names what is reported (``check``, ``trace``, ``audit``, ``suite``, ...); a *format*
names how (``text``, ``json``, ``md``, ``sarif``, ``html``). Renderer modules register with
:func:`reporter` when imported; a command imports them and then declares its output options
with :func:`output_options`, whose ``--format`` choices are exactly the registered formats, and
writes with :func:`emit` (standard output, or ``--output FILE`` for every format).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from residentkv.errors import UsageError
from residentkv.printable import printable_fields

#: the format whose fields are escaped before rendering (the terminal's)
TEXT = "text"


def find_srcroot(start: Path | None = None) -> Path:
    """The enclosing git work tree of *start* (default: the working directory), else *start*."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


@dataclass(frozen=True)
class RenderOptions:
    """What a renderer may need beyond the document: where repo-relative paths start, and the
    command that produced the report (SARIF ``automationDetails``)."""

    srcroot: Path = field(default_factory=find_srcroot)
    command: str = "residentkv"

    @classmethod
    def for_command(cls, command: str, srcroot: str | None = None) -> RenderOptions:
        """Options of one command; *srcroot* defaults to the enclosing git work tree."""
        return cls(srcroot=Path(srcroot).resolve() if srcroot else find_srcroot(),
                   command=command)


Renderer = Callable[[Any, RenderOptions], str]
_REGISTRY: dict[str, dict[str, Renderer]] = {}
F = TypeVar("F", bound=Callable[..., Any])


def reporter(kind: str, fmt: str) -> Callable[[Renderer], Renderer]:
    """Register a renderer of *kind* documents in format *fmt* (each pair registered once)."""

    def add(fn: Renderer) -> Renderer:
        formats = _REGISTRY.setdefault(kind, {})
        if fmt in formats and formats[fmt] is not fn:
            raise ValueError(f"reporter {kind}/{fmt} registered twice")
        formats[fmt] = fn
        return fn

    return add


def formats(kind: str) -> tuple[str, ...]:
    """The registered formats of *kind*, text first, the rest sorted."""
    names = sorted(_REGISTRY.get(kind, {}), key=lambda f: (f != "text", f))
    return tuple(names)


def render(kind: str, fmt: str, doc: Any, opts: RenderOptions | None = None) -> str:
    """Render *doc* (the JSON-able result of one command) in format *fmt*.

    A text report gets every string field escaped first (:func:`printable_fields`): a
    field's newline, carriage return or escape sequence never reaches a terminal or a log as
    such, so no field can forge a report line. (Markdown, HTML, SARIF and JSON escape in
    their own syntax.)"""
    try:
        fn = _REGISTRY[kind][fmt]
    except KeyError:
        raise UsageError(f"no {fmt} report for {kind}; expected one of "
                         f"{', '.join(formats(kind)) or '(none)'}") from None
    return fn(printable_fields(doc) if fmt == TEXT else doc, opts or RenderOptions())


def output_options(kind: str, *, default: str = "text") -> Callable[[F], F]:
    """``--format`` (the registered formats of *kind*) and ``--output FILE`` for a command."""
    choices = formats(kind)
    if default not in choices:
        raise ValueError(f"default format {default!r} not registered for {kind}")

    def decorate(fn: F) -> F:
        fn = click.option("--output", "output", type=click.Path(dir_okay=False),
                          default=None, metavar="FILE",
                          help="Write the report to FILE instead of standard output.")(fn)
        return click.option("--format", "fmt", type=click.Choice(choices), default=default,
                            show_default=True, help="Report format.")(fn)

    return decorate


def srcroot_option(fn: F) -> F:
    """``--srcroot DIR``: the root that report paths are made relative to (SARIF SRCROOT)."""
    return click.option(
        "--srcroot", type=click.Path(file_okay=False), default=None, metavar="DIR",
        help="Root for repo-relative paths in reports (default: the enclosing git work tree, "
             "else the working directory).")(fn)


def emit(kind: str, fmt: str, doc: Any, output: str | None,
         opts: RenderOptions | None = None) -> None:
    """Render and write to *output* (a file) or standard output."""
    text = render(kind, fmt, doc, opts)
    if not text.endswith("\n"):
        text += "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--output {output}: cannot write: {e.strerror or e}",
                         path=output) from None
