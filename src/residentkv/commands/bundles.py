"""``residentkv bundles list`` and ``bundles show MODE``: what each protection mode obliges."""

from __future__ import annotations

import difflib

import click

import residentkv.report.bundle_report  # noqa: F401  (registers the bundle reporters)
from residentkv.errors import UsageError
from residentkv.lowering.bundles import load_bundles
from residentkv.report.registry import emit, output_options


@click.group("bundles")
def bundles() -> None:
    """Show the obligation bundles: per protection mode, what satisfies B1-B4."""


@bundles.command("list")
@click.option("--bundles", "bundles_dir", type=click.Path(file_okay=False), default=None,
              help="Directory of extra obligation bundles (as for check).")
@output_options("bundles")
def list_(bundles_dir: str | None, fmt: str, output: str | None) -> None:
    """List the protection modes that rows can lower onto."""
    found = load_bundles(bundles_dir)
    emit("bundles", fmt, [found[m] for m in sorted(found)], output)


@bundles.command("show")
@click.argument("mode")
@click.option("--bundles", "bundles_dir", type=click.Path(file_okay=False), default=None,
              help="Directory of extra obligation bundles (as for check).")
@output_options("bundle")
def show(mode: str, bundles_dir: str | None, fmt: str, output: str | None) -> None:
    """Show MODE's bundle: each obligation's requirement ids and the evidence that satisfies it."""
    found = load_bundles(bundles_dir)
    if mode not in found:
        close = difflib.get_close_matches(mode, list(found), n=2)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"bundles show: no bundle for mode '{mode}'{hint} "
                         f"(modes: {', '.join(sorted(found))})")
    emit("bundle", fmt, found[mode], output)
