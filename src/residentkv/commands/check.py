"""``residentkv check DESCRIPTOR...``: classify every row, fail-closed (SPEC §7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

import residentkv.report.html
import residentkv.report.markdown
import residentkv.report.matrix
import residentkv.report.sarif  # noqa: F401  (registers the check reporters)
from residentkv.commands.schema import register_schema
from residentkv.lowering.bundles import Bundle
from residentkv.lowering.check import example_paths, run_check
from residentkv.lowering.descriptor import descriptor_json_schema
from residentkv.lowering.strict import strict_exit_code, strict_shortfalls
from residentkv.report.json_report import strict_lines, to_json
from residentkv.report.registry import RenderOptions, emit, output_options, srcroot_option
from residentkv.trust.attest import attest_verdict
from residentkv.trust.envelope import load_private_key
from residentkv.trust.policy import load_policy
from residentkv.trust.roots import TraceTrust


def _bundle_schema() -> dict[str, Any]:
    schema = Bundle.model_json_schema(by_alias=True)
    for internal in ("source", "digest"):
        schema["properties"].pop(internal, None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "residentkv.bundle/v1"
    return schema


def _descriptor_schema() -> dict[str, Any]:
    schema = descriptor_json_schema()
    # editors may name the schema inside the file; the checker ignores the key
    schema["properties"]["$schema"] = {
        "type": "string", "description": "URL of this JSON Schema, for editors (ignored)"}
    return schema


# Published here because the lowering layer registers its schemas when its commands load.
register_schema("descriptor", _descriptor_schema)
register_schema("bundle", _bundle_schema)


@click.command("check")
@click.argument("descriptors", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--examples", is_flag=True,
              help="Also check the example descriptors shipped in the package.")
@click.option("--source", "sources", multiple=True, metavar="NAME=PATH",
              help="Source root for anchors of package NAME: a directory, wheel or sdist.")
@click.option("--bundles", "bundles_dir", type=click.Path(file_okay=False),
              help="Directory of extra obligation bundles (replace shipped ones by mode).")
@click.option("--strict", is_flag=True,
              help="Also exit 1 on drifted anchors, warnings, and anchors only cited in a "
                   "granting row (for CI).")
@click.option("--trust", "trust", type=click.Path(dir_okay=False), default=None,
              help="Trust policy: the keys whose trace attestations may grant, and for what.")
@click.option("--attest", "attest_key", type=click.Path(dir_okay=False), default=None,
              help="Sign the verdict with this ed25519 key: a SLSA VSA written to "
                   "--attest-out (default: OUTPUT.intoto.json, or check.intoto.json).")
@click.option("--attest-out", "attest_out", type=click.Path(dir_okay=False), default=None,
              help="Where --attest writes the signed verdict.")
@output_options("check")
@srcroot_option
@click.pass_context
def check(ctx: click.Context, descriptors: tuple[str, ...], examples: bool,
          sources: tuple[str, ...], bundles_dir: str | None, strict: bool, trust: str | None,
          attest_key: str | None, attest_out: str | None, fmt: str,
          output: str | None, srcroot: str | None) -> None:
    """Verify anchors and classify each row of DESCRIPTOR files into one of six classes.

    Exit 0: every row matches its expect and no conformance claim fell short; 1: some row
    differs or overclaims or is invalid (with --strict also: an anchor drifted, a warning, or
    an anchor only cited in a granting row); 2: input could not be evaluated.
    """
    paths = [*descriptors, *(example_paths() if examples else [])]
    signer = load_private_key(Path(attest_key)) if attest_key else None
    roots = TraceTrust(policy=load_policy(trust) if trust else None)
    result = run_check(paths, sources, bundles_dir, trust=roots)
    doc = to_json(result)
    if strict:
        doc["strict"] = {"shortfalls": strict_shortfalls(doc)}
        doc["exit_code"] = strict_exit_code(doc)
    emit("check", fmt, doc, output, RenderOptions.for_command("check", srcroot))
    if strict and doc["strict"]["shortfalls"]:
        # whatever the format and wherever the report went, a CI log shows why it failed
        for line in strict_lines(doc):
            click.echo(line, err=True)
    if signer is not None:
        out = Path(attest_out or (f"{output}.intoto.json" if output and output != "-"
                                  else "check.intoto.json"))
        click.echo(f"check: signed verdict {attest_verdict(doc, 'check', signer, out)}",
                   err=True)
    ctx.exit(doc["exit_code"])
