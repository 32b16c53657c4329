"""``residentkv audit``: the main job over the curated runtime descriptors (SPEC §11)."""

from __future__ import annotations

from pathlib import Path

import click

from residentkv.audit.job import HTML_FILE, AuditOptions, run_audit, write_report
from residentkv.report.audit_terminal import render_audit_terminal
from residentkv.report.registry import RenderOptions, emit, output_options, srcroot_option
from residentkv.sources.cache import ENV_CACHE
from residentkv.trust.attest import attest_verdict
from residentkv.trust.envelope import load_private_key
from residentkv.trust.policy import load_policy

__all__ = ["audit"]


@click.command("audit")
@click.option("--out", "out", type=click.Path(file_okay=False), default="residentkv-report",
              show_default=True, help="Folder for report.md, report.json, report.sarif, "
                                      "audit.json (and report.html with --html).")
@click.option("--cache", "cache", type=click.Path(file_okay=False), default=None,
              help=f"Release cache (default: ${ENV_CACHE} or ~/.cache/residentkv/sources).")
@click.option("--offline", is_flag=True,
              help="Never download pinned releases; anchors of missing ones stay unverified.")
@click.option("--live", is_flag=True,
              help="Run the vLLM witness now and classify the adapter rows on its traces.")
@click.option("--bundles", "bundles_dir", type=click.Path(file_okay=False), default=None,
              help="Directory of extra obligation bundles.")
@click.option("--html", "write_html", is_flag=True,
              help="Also write report.html into --out: one self-contained page (no network, "
                   "printable). Deprecated: `--format html --output FILE` writes the same page.")
@click.option("--rows", "show_rows", is_flag=True,
              help="Also print the row table (it is always in the reports).")
@click.option("--trust", "trust", type=click.Path(dir_okay=False), default=None,
              help="Trust policy: the keys whose trace attestations may grant, and for what.")
@click.option("--attest", "attest_key", type=click.Path(dir_okay=False), default=None,
              help="Sign the verdict with this ed25519 key: OUT/verdict.intoto.json (SLSA VSA); "
                   "with --live, also each trace the witness records (TRACE.intoto.json).")
@output_options("audit")
@srcroot_option
@click.pass_context
def audit(ctx: click.Context, out: str, cache: str | None, offline: bool, live: bool,
          bundles_dir: str | None, write_html: bool, show_rows: bool, trust: str | None,
          attest_key: str | None, fmt: str, output: str | None, srcroot: str | None) -> None:
    """Fetch pinned sources, verify anchors, run the witness, classify every curated row.

    Exit 0 when every row has its expected class, every anchor into a pinned release verified,
    no public runtime row reached a positive class, and the live witness (with --live) matched
    SPEC §9; 1 when the audit fell short; 2 when it could not run. --format json prints the
    same JSON result as `residentkv check --format json`. Every file (the folder's and
    --output's) is rendered by the same reporters; --format picks one for standard output or
    --output FILE.
    """
    def progress(msg: str) -> None:
        click.echo(f"audit: {msg}", err=True)

    signer = load_private_key(Path(attest_key)) if attest_key else None
    render_opts = RenderOptions.for_command("audit", srcroot)
    opts = AuditOptions(out=Path(out), cache=Path(cache) if cache else None,
                        fetch=not offline, live=live, bundles_dir=bundles_dir,
                        progress=progress, trust_policy=load_policy(trust) if trust else None,
                        trace_signer=signer if live else None, render=render_opts)
    result = run_audit(opts)
    if signer is not None:
        signed = attest_verdict(dict(result.doc, exit_code=result.exit_code), "audit", signer,
                                Path(out) / "verdict.intoto.json")
        result.files["verdict.intoto.json"] = str(signed)
        progress(f"signed verdict {signed}")
    if write_html:
        write_report(result, Path(out), HTML_FILE, render_opts)
    if fmt == "text" and output is None:  # the terminal: matrix, counts, attention, report path
        click.echo(render_audit_terminal(result, rows=show_rows), nl=False)
    else:
        emit("audit", fmt, result, output, render_opts)
    ctx.exit(result.exit_code)
