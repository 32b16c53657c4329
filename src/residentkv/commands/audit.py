"""``residentkv audit``: the main job over the curated runtime descriptors (SPEC §11)."""

from __future__ import annotations

from pathlib import Path

import click

from residentkv.audit.job import AuditOptions, run_audit
from residentkv.audit.render import render_audit_text
from residentkv.report.json_report import dumps
from residentkv.sources.cache import ENV_CACHE

__all__ = ["audit"]


@click.command("audit")
@click.option("--out", "out", type=click.Path(file_okay=False), default="residentkv-report",
              show_default=True, help="Folder for report.md, report.json, report.sarif, "
                                      "audit.json.")
@click.option("--cache", "cache", type=click.Path(file_okay=False), default=None,
              help=f"Release cache (default: ${ENV_CACHE} or ~/.cache/residentkv/sources).")
@click.option("--offline", is_flag=True,
              help="Never download pinned releases; anchors of missing ones stay unverified.")
@click.option("--live", is_flag=True,
              help="Run the vLLM witness now and classify the adapter rows on its traces.")
@click.option("--bundles", "bundles_dir", type=click.Path(file_okay=False), default=None,
              help="Directory of extra obligation bundles.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True,
              help="json prints report.json: the JSON of `residentkv check --format json` "
                   "plus each obligation's note and each anchor's target.")
@click.pass_context
def audit(ctx: click.Context, out: str, cache: str | None, offline: bool, live: bool,
          bundles_dir: str | None, fmt: str) -> None:
    """Fetch pinned sources, verify anchors, run the witness, classify every curated row.

    Exit 0 when every row has its expected class, every anchor into a pinned release verified,
    no public runtime row reached a positive class, and the live witness (with --live) matched
    SPEC §9; 1 when the audit fell short; 2 when it could not run.
    """
    def progress(msg: str) -> None:
        click.echo(f"audit: {msg}", err=True)

    opts = AuditOptions(out=Path(out), cache=Path(cache) if cache else None,
                        fetch=not offline, live=live, bundles_dir=bundles_dir,
                        progress=progress)
    result = run_audit(opts)
    if fmt == "json":
        click.echo(dumps(result.doc), nl=False)
    else:
        click.echo(render_audit_text(result), nl=False)
    ctx.exit(result.exit_code)
