"""``residentkv anchors {verify,make}``: check cited anchors, or write a new one."""

from __future__ import annotations

import io
from pathlib import Path

import click
from ruamel.yaml import YAML

from residentkv.errors import UsageError
from residentkv.lowering.anchors import Verifier, make_anchor
from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.check import open_sources
from residentkv.lowering.descriptor import read_descriptor
from residentkv.lowering.sources import PathRefused
from residentkv.sources.roots import default_roots


@click.group("anchors")
def anchors() -> None:
    """Verify the anchors of descriptors, or make a ready-to-paste source anchor."""


@anchors.command("verify")
@click.argument("descriptors", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--source", "sources", multiple=True, metavar="NAME=PATH",
              help="Source root for anchors of package NAME: a directory, wheel or sdist.")
@click.option("--cache", default=None, type=click.Path(file_okay=False),
              help="Release cache of `residentkv sources fetch` (default: its usual place).")
@click.option("--no-cache", is_flag=True, help="Use only the --source roots given.")
@click.pass_context
def verify(ctx: click.Context, descriptors: tuple[str, ...], sources: tuple[str, ...],
           cache: str | None, no_cache: bool) -> None:
    """Verify every anchor of DESCRIPTOR files; exit 1 if any is drifted, missing or failed.

    Packages without a --source are verified against the pinned releases in the release cache
    (`residentkv sources fetch`), when present; otherwise their anchors are unverifiable.
    """
    given = open_sources(sources)
    roots = {} if no_cache else {k: r for k, r in default_roots(cache).items()
                                 if k.split("==")[0] not in given}
    roots.update(given)
    verifier = Verifier(roots)
    modes = set(load_bundles())
    bad = 0
    for path in descriptors:
        for lr in read_descriptor(path, modes).rows:
            if lr.row is None:
                bad += 1
                click.echo("\n".join(f.render() for f in lr.findings))
                continue
            for aid, anchor in lr.row.anchors.items():
                r = verifier.verify(aid, anchor, Path(path).parent)
                line, col = lr.loc(f"anchors.{aid}")
                bad += r.result in ("drifted", "missing", "failed")
                click.echo(f"{path}:{line}:{col}: {lr.row_id} {aid} {r.kind} {r.result}: "
                           f"{r.detail}")
    ctx.exit(1 if bad else 0)


@anchors.command("make")
@click.argument("target", metavar="PATH[:SYMBOL|:START-END]")
@click.option("--source", "source", required=True, metavar="NAME=PATH",
              help="The source root the path is relative to.")
@click.option("--version", "version", default=None, help="Package version to record.")
@click.option("--id", "anchor_id", default="a1", show_default=True, help="Anchor id to print.")
def make(target: str, source: str, version: str | None, anchor_id: str) -> None:
    """Print a ready-to-paste source anchor (with its sha256) for TARGET in the source."""
    roots = open_sources([source])
    root = next(iter(roots.values()))
    try:
        anchor = make_anchor(root, target, version)
    except (ValueError, PathRefused, UnicodeDecodeError, SyntaxError) as e:
        raise UsageError(f"anchors make {target}: {e}") from None
    yaml = YAML()
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump({anchor_id: anchor}, buf)
    click.echo(buf.getvalue(), nl=False)
