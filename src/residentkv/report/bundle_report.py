"""Render obligation bundles: ``residentkv bundles list`` and ``bundles show MODE``."""

from __future__ import annotations

from typing import Any

from residentkv.jsontext import json_text
from residentkv.lowering.bundles import SOURCE, Bundle
from residentkv.model.vocabulary import OBLIGATION_SHORT as SHORT
from residentkv.model.vocabulary import OBLIGATIONS
from residentkv.report.registry import RenderOptions, reporter
from residentkv.report.text import render_table


def bundle_json(b: Bundle) -> dict[str, Any]:
    """A bundle as JSON, as published (with the file it was read from)."""
    return b.model_dump(mode="json", by_alias=True, exclude={"digest"})


def _alternative(alt: list[str]) -> str:
    parts = ["a verified source anchor" if g == SOURCE else f"gate {g} passes" for g in alt]
    return " and ".join(parts)


@reporter("bundles", "text")
def render_list_text(bundles: list[Bundle], _opts: RenderOptions) -> str:
    rows = [[b.mode, f"v{b.version}", ", ".join(b.outcomes), b.summary] for b in bundles]
    return render_table("obligation bundles (protection modes a row can lower onto)",
                        ("mode", "version", "outcomes", "summary"), rows, width=140)


@reporter("bundles", "json")
def render_list_json(bundles: list[Bundle], _opts: RenderOptions) -> str:
    return json_text([bundle_json(b) for b in bundles])


@reporter("bundle", "text")
def render_show_text(b: Bundle, _opts: RenderOptions) -> str:
    out = [f"{b.mode} (bundle v{b.version}, from {b.source})", f"  {b.summary}",
           f"  outcomes: {', '.join(b.outcomes)}", ""]
    for name in OBLIGATIONS:
        ob = b.obligations[name]
        out.append(f"{SHORT[name]} {name}: {ob.summary}")
        out.append(f"  requirement ids: {', '.join(ob.requirements)}")
        out.append("  satisfied by any of:")
        out += [f"    - {_alternative(alt)}" for alt in ob.satisfied_by]
    out += ["", "A satisfied obligation needs verified evidence covering one alternative; "
                "cited evidence never grants."]
    return "\n".join(out) + "\n"


@reporter("bundle", "json")
def render_show_json(b: Bundle, _opts: RenderOptions) -> str:
    return json_text(bundle_json(b))


@reporter("bundle", "md")
def render_show_md(b: Bundle, _opts: RenderOptions) -> str:
    out = [f"# `{b.mode}` (bundle v{b.version})", "", b.summary, "",
           f"Outcomes: {', '.join(b.outcomes)}", "",
           "| obligation | requirement ids | satisfied by any of |", "|---|---|---|"]
    for name in OBLIGATIONS:
        ob = b.obligations[name]
        alts = "; ".join(_alternative(a) for a in ob.satisfied_by)
        out.append(f"| {SHORT[name]} `{name}` | {', '.join(ob.requirements)} | {alts} |")
    return "\n".join(out) + "\n"
