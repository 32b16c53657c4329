"""``residentkv anchors {verify,make}``: check cited anchors, or write a new one."""

from __future__ import annotations

import io
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import click
from ruamel.yaml import YAML

import residentkv.report.command_reports  # noqa: F401  (registers the review reporters)
from residentkv.commands.sources import target_roots
from residentkv.errors import UsageError, UserInputError
from residentkv.lowering.anchors import Verifier, make_anchor
from residentkv.lowering.bundles import load_bundles
from residentkv.lowering.check import open_sources
from residentkv.lowering.descriptor import read_descriptor
from residentkv.lowering.sources import PathRefused, SourceRoot
from residentkv.report.registry import emit, output_options
from residentkv.sources.cache import cache_dir
from residentkv.sources.pins import parse_requirement
from residentkv.sources.review import REVIEWABLE, ReviewItem, apply_review, review_items
from residentkv.sources.roots import cached_roots, default_roots, runtime_descriptor_paths


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
    tally: Counter[str] = Counter()
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
                tally[r.result] += 1
                click.echo(f"{path}:{line}:{col}: {lr.row_id} {aid} {r.kind} {r.result}: "
                           f"{r.detail}")
    if not tally["verified"]:
        _nothing_verified(descriptors, tally, no_cache)
    ctx.exit(1 if bad or not tally["verified"] else 0)


def _nothing_verified(descriptors: tuple[str, ...], tally: Counter[str], no_cache: bool) -> None:
    """Say why a run that verified no anchor fails (fail-closed: unverifiable is never ok)."""
    seen = ", ".join(f"{n} {k}" for k, n in sorted(tally.items())) or "no valid anchor"
    hint = ("give --source NAME=PATH for the packages the anchors cite" if no_cache else
            "give --source NAME=PATH, or fetch the pinned releases: residentkv sources fetch")
    for path in descriptors:
        click.echo(UserInputError(f"no anchor was verified ({seen}); a check that verified "
                                  "nothing shows nothing", code="A050", path=path))
        click.echo(f"  help: {hint}")


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


@anchors.command("review")
@click.argument("descriptors", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--to", "target", required=True, metavar="DIST==VERSION|NAME=PATH",
              help="The new release, e.g. vllm==0.33.0 (fetched into the cache if missing).")
@click.option("--release", default=None, metavar="VERSION",
              help="The version a NAME=PATH target holds (required with NAME=PATH).")
@click.option("--from", "baseline_opts", multiple=True, metavar="NAME=PATH",
              help="Root holding the anchors' own (old) release (default: the release cache).")
@click.option("--anchor", "only", multiple=True, metavar="ID|ROW:ID",
              help="Review only these anchors (repeatable; default: all of the rows).")
@click.option("--at", "at_opts", multiple=True, metavar="ID|ROW:ID=START-END",
              help="The new lines of a line-range anchor whose old text was not found "
                   "(repeatable); it is then diffed and approvable against those lines.")
@click.option("--approve", is_flag=True,
              help="Approve every changed anchor shown (non-interactive; needs --reason).")
@click.option("--reason", default=None, help="One-line reason recorded with the approval.")
@click.option("--date", "date_", default=None, metavar="YYYY-MM-DD",
              help="Date recorded with the approval (default: today, UTC).")
@click.option("--cache", "cache", type=click.Path(file_okay=False), default=None,
              help="Release cache directory (default: $RESIDENTKV_CACHE or "
                   "~/.cache/residentkv/sources).")
@click.option("--no-fetch", is_flag=True, help="Never download; use the cache only.")
@output_options("review")
@click.pass_context
def review(ctx: click.Context, descriptors: tuple[str, ...], target: str, release: str | None,
           baseline_opts: tuple[str, ...], only: tuple[str, ...], at_opts: tuple[str, ...],
           approve: bool,
           reason: str | None,
           date_: str | None, cache: str | None, no_fetch: bool, fmt: str,
           output: str | None) -> None:
    """Show each changed anchor of the rows naming the --to release as a diff; record approvals.

    On approval (interactive confirm, or --approve --reason) the new sha256, lines and version
    plus a `reviewed: {release, date, reason}` record are written into the descriptor (comments
    and formatting kept). An unapproved changed anchor stays pending: it does not verify against
    the release its row names, so the row fails closed. Exit 0 when no anchor is left pending,
    1 otherwise, 2 on unusable input.
    """
    if approve and not reason:
        raise UsageError("--approve needs --reason \"...\" (one line: why the status holds)")
    if date_ is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date_):
        raise UsageError(f"--date {date_!r}: expected YYYY-MM-DD")
    at = _explicit_lines(at_opts)
    folder = cache_dir(cache)
    package, version, label, root = _review_target(target, release, folder, not no_fetch)
    given = open_sources(baseline_opts)
    baseline = {k: r for k, r in cached_roots(folder)[0].items() if k.split("==")[0] not in given}
    baseline.update(given)
    paths = list(descriptors) or [str(p) for p in runtime_descriptor_paths()]
    items = review_items(paths, package, version, baseline, root, at=at)
    interactive = not approve and _stdin_is_tty() and fmt == "text"
    for it in items:
        # --anchor narrows what is shown and up for approval; every anchor counts as pending
        picked = not only or it.anchor in only or any(f"{r}:{it.anchor}" in only
                                                      for r in it.cited_by)
        if fmt == "text" and picked:
            _show(it)
        if it.status in REVIEWABLE and picked:
            rows = ", ".join(it.cited_by)
            it.approved = approve or (interactive and click.confirm(
                f"  the status of {rows} still holds on {label}: approve?", default=False))
    if any(it.approved for it in items) and not reason:
        reason = click.prompt("  one-line reason recorded with the approval")
    when = date_ or datetime.now(UTC).date().isoformat()
    written = apply_review(items, label, version, reason or "", when)
    pending = [it for it in items if it.status not in ("unchanged", "moved") and not it.approved]
    emit("review", fmt, {"schema": "residentkv.review/v1", "release": label,
                         "items": [it.to_json() for it in items], "written": written,
                         "pending": len(pending)}, output)
    ctx.exit(1 if pending else 0)


def _explicit_lines(specs: tuple[str, ...]) -> dict[str, str]:
    """``--at ID=START-END`` options as {ID or ROW:ID: "START-END"}."""
    out = {}
    for spec in specs:
        key, sep, lines = spec.rpartition("=")
        m = re.fullmatch(r"(\d+)-(\d+)", lines)
        if not sep or not key or m is None or not 0 < int(m[1]) <= int(m[2]):
            raise UsageError(f"--at {spec!r}: expected ID=START-END (1-based, START <= END)")
        out[key] = lines
    return out


def _stdin_is_tty() -> bool:
    """Whether approvals can be asked for (never in a pipe or CI: nothing is approved there)."""
    return sys.stdin.isatty()


def _review_target(spec: str, release: str | None, folder: Path,
                   fetch_missing: bool) -> tuple[str, str, str, SourceRoot]:
    """(package, version, release label, root) of the --to release."""
    labels: dict[str, str] = {}
    ((package, root),) = target_roots((spec,), folder, fetch_missing, labels).items()
    if not re.match(r"^[A-Za-z0-9._-]+=[^=]", spec):
        pin = parse_requirement(spec)
        return package, pin.version, pin.requirement, root
    if not release:
        raise UsageError(f"--to {spec}: a NAME=PATH target needs --release VERSION (the "
                         "version the rows name)")
    return package, release, f"{package}=={release}", root


def _show(it: ReviewItem) -> None:
    head = f"{it.status:11} {it.anchor} {it.where}"
    click.echo(f"{head}: {it.detail}")
    click.echo(f"            cited by {', '.join(it.cited_by)}")
    if it.status == "changed" and it.old_text:  # never a diff against lines not found
        click.echo(it.diff(), nl=False)
