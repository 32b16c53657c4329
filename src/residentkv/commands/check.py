"""``residentkv check DESCRIPTOR...``: classify every row, fail-closed (SPEC §7)."""

from __future__ import annotations

import json
from typing import Any

import click

from residentkv.commands.schema import register_schema
from residentkv.lowering.bundles import Bundle
from residentkv.lowering.check import example_paths, run_check
from residentkv.lowering.descriptor import descriptor_json_schema
from residentkv.report.json_report import dumps, to_json
from residentkv.report.markdown import render_markdown
from residentkv.report.matrix import render_text
from residentkv.report.sarif import render_sarif


def _bundle_schema() -> dict[str, Any]:
    schema = Bundle.model_json_schema(by_alias=True)
    for internal in ("source", "digest"):
        schema["properties"].pop(internal, None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "residentkv.bundle/v1"
    return schema


# Published here because the lowering layer registers its schemas when its commands load.
register_schema("descriptor", descriptor_json_schema)
register_schema("bundle", _bundle_schema)


@click.command("check")
@click.argument("descriptors", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--examples", is_flag=True,
              help="Also check the example descriptors shipped in the package.")
@click.option("--source", "sources", multiple=True, metavar="NAME=PATH",
              help="Source root for anchors of package NAME: a directory, wheel or sdist.")
@click.option("--bundles", "bundles_dir", type=click.Path(file_okay=False),
              help="Directory of extra obligation bundles (replace shipped ones by mode).")
@click.option("--format", "fmt", type=click.Choice(["text", "md", "json", "sarif"]),
              default="text", show_default=True, help="Report format.")
@click.pass_context
def check(ctx: click.Context, descriptors: tuple[str, ...], examples: bool,
          sources: tuple[str, ...], bundles_dir: str | None, fmt: str) -> None:
    """Verify anchors and classify each row of DESCRIPTOR files into one of six classes.

    Exit 0: every row matches its expect and no conformance claim fell short; 1: some row
    differs or overclaims or is invalid; 2: input could not be evaluated.
    """
    paths = [*descriptors, *(example_paths() if examples else [])]
    result = run_check(paths, sources, bundles_dir)
    doc = to_json(result)
    if fmt == "json":
        click.echo(dumps(doc), nl=False)
    elif fmt == "sarif":
        click.echo(json.dumps(render_sarif(doc), indent=2, sort_keys=True))
    elif fmt == "md":
        click.echo(render_markdown(doc), nl=False)
    else:
        click.echo(render_text(doc), nl=False)
    ctx.exit(result.exit_code)
