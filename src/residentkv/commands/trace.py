"""``residentkv trace check``: run the gates over one or more traces."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import click

from residentkv.errors import UsageError, UserInputError, install_hint
from residentkv.findings import Finding
from residentkv.limits import read_stdin
from residentkv.model.events import Envelope, event_to_dict
from residentkv.report import import_report, reproduce_report, trace_report  # noqa: F401
from residentkv.report.registry import (
    RenderOptions,
    emit,
    formats,
    output_options,
    render,
    srcroot_option,
)
from residentkv.trace.gates import ALL_GATE_NAMES, GATE_NAMES, TraceCheck, check_trace, claims_in
from residentkv.trace.importers import DIALECTS
from residentkv.trace.reader import DEFAULT_MAX_LINE_BYTES, STDIN, TraceReader
from residentkv.trace.reproduce import reproduce, succeeded
from residentkv.trace.tracker import collect


@click.group()
def trace() -> None:
    """Check event traces against the gates of the contract."""


@trace.command("check")
@click.argument("traces", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--gate", "gates", multiple=True, type=click.Choice(ALL_GATE_NAMES),
              help="Gate to run (repeatable; default: the four scenario gates). "
                   "conformance: the health verdict of a long-running stream, "
                   "with the claims open where the reading stops listed as live.")
@click.option("--claim", "claim_id", default=None, help="Judge only this claim id.")
@output_options("trace")
@srcroot_option
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_LINE_BYTES,
              show_default=True, help="Longest accepted trace line.")
def check(traces: tuple[str, ...], gates: tuple[str, ...], claim_id: str | None, fmt: str,
          output: str | None, srcroot: str | None, max_line_bytes: int) -> None:
    """Run trace gates over TRACES.

    A trace file may hold several streams, one per engine incarnation (SPEC §9.1); claims are
    followed across them. Exit 0 when every requested gate passes for every claim, 1 when some
    gate fails or a trace has problems, 2 when a trace cannot be used at all. With --gate
    conformance, a claim open where the reading stops is live, not failed: a healthy stream
    read mid-run exits 0 and lists its live claims.
    """
    if traces.count("-") > 1:
        raise UsageError("standard input (-) can be read once; expected at most one -")
    checks: list[TraceCheck] = [
        check_trace(p, gates or GATE_NAMES, claim_id, max_line_bytes=max_line_bytes,
                    # read here, not reopened by fd: an in-process runner has no file descriptor
                    stream=sys.stdin.buffer if p == "-" else None)
        for p in traces
    ]
    _refuse_unknown_claim(checks, claim_id)
    emit("trace", fmt, trace_report.to_json_obj(checks), output,
         RenderOptions.for_command("trace-check", srcroot))
    unusable = [c for c in checks if c.events == 0]
    if unusable:
        raise click.exceptions.Exit(2)
    raise click.exceptions.Exit(0 if all(c.passed for c in checks) else 1)


def _refuse_unknown_claim(checks: list[TraceCheck], claim_id: str | None) -> None:
    """A --claim no trace holds: one error listing the claims present, exit 1.

    Exit 1, not 2: the trace was read and shows nothing for that claim, which is a failed
    judgement (no vacuous pass), not an unreadable input; but a table of every requirement
    "missing" would bury the real mistake, so only this error is printed. A trace with no
    valid event at all is unusable whatever claim is asked for: exit 2, as without --claim.
    """
    if claim_id is None:
        return
    misses = [c.path for c in checks if any(p.code == "T011" for p in c.problems)]
    if not misses or len(misses) != len(checks):
        return
    where = "; ".join(f"{path}: {_claims_in(path, claim_id)}" for path in misses)
    err = UsageError(f"--claim {claim_id}: no trace has a valid claim event for this claim; "
                     f"{where}", code="T011")
    click.echo(str(err), err=True)
    raise click.exceptions.Exit(2 if any(c.events == 0 for c in checks) else 1)


def _claims_in(path: str, claim_id: str) -> str:
    """What a trace holds instead of *claim_id* (read again only on this error path): the
    claims its valid events name, exactly as the gates see them, and where the requested id
    does occur -- on a line the reader rejected, or on an event that is no claim event -- or
    which present claim differs from it only in spelling."""
    if path == STDIN:
        return "(standard input, not re-read)"
    reader = TraceReader(path)
    named: list[str] = []  # valid events naming the claim that are no claim events

    def events() -> Iterator[Envelope]:
        for line, event in reader:
            if getattr(event, "claim_id", None) == claim_id:
                named.append(f"line {line} ({event.event})")  # type: ignore[attr-defined]
            yield event

    try:
        present = claims_in(collect(events()))
    except UserInputError as e:
        return f"(cannot re-read: {e.message})"
    shown = ", ".join(json.dumps(c, ensure_ascii=False) for c in present) or "(none)"
    notes = [f"claims with a valid claim event: {shown}"]
    rejected = _rejected_lines_naming(Path(path), claim_id, reader.problems)
    if rejected:
        notes.append(f"{json.dumps(claim_id)} is named only on lines the reader rejected: "
                     + "; ".join(rejected))
    if named:
        notes.append(f"{json.dumps(claim_id)} is named by events that are no claim events: "
                     + ", ".join(named[:5]))
    near = [c for c in present if _spelling(c) == _spelling(claim_id)]
    if near:
        notes.append(f"did you mean {json.dumps(near[0], ensure_ascii=False)}? (ids are "
                     "compared exactly)")
    return "; ".join(notes)


def _spelling(claim: str) -> str:
    return unicodedata.normalize("NFKC", claim).strip().casefold()


def _rejected_lines_naming(path: Path, claim_id: str, problems: list[Finding]) -> list[str]:
    """``line N (CODE: message)`` for each rejected line whose raw JSON names *claim_id*."""
    why = {p.line: f"{p.code}: {p.message}" for p in problems if p.line is not None}
    out: list[str] = []
    try:
        with path.open("rb") as fh:
            for n, raw in enumerate(fh, 1):
                if n not in why or len(out) >= 5:
                    continue
                try:
                    event = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(event, dict) and claim_id in (
                        event.get("claim_id"), event.get("outcome_claim_id"),
                        event.get("claim_ref")):
                    out.append(f"line {n} ({why[n]})")
    except OSError:
        return []
    return out


@trace.command("import")
@click.argument("source", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--dialect", required=True, type=click.Choice(sorted(DIALECTS)),
              help="The foreign trace dialect.")
@click.option("-o", "--out", type=click.Path(dir_okay=False), default=None,
              help="Write the v1 trace here (default: standard output).")
@click.option("--report", "report_format", type=click.Choice(formats("import")),
              default="text", show_default=True, help="Format of the import report (stderr).")
def import_(source: str, dialect: str, out: str | None, report_format: str) -> None:
    """Import a foreign trace into residentkv.event/v1.

    Every dropped event, unmapped field, assumption and synthesized event is reported on
    standard error. Exit 0 when every foreign line was read, 1 when some were invalid.
    """
    if out is not None:
        _writable_out(out)
    data = read_stdin("trace") if source == "-" else None
    result = DIALECTS[dialect](source, data)
    # allow_nan=False: a NaN or Infinity would be a line no strict v1 reader accepts
    lines = "".join(
        json.dumps(event_to_dict(e), separators=(",", ":"), allow_nan=False) + "\n"
        for e in result.events
    )
    if out is None:
        click.echo(lines, nl=False)
    else:
        try:
            Path(out).write_text(lines)
        except OSError as e:
            raise UsageError(f"--out {out}: cannot write: {e.strerror or e}",
                             path=out) from None
    click.echo(render("import", report_format, result.report), err=True, nl=False)
    raise click.exceptions.Exit(1 if result.report.problems else 0)


def _writable_out(out: str) -> None:
    """Refuse an --out whose folder is missing (or is not a folder) before importing: a usage
    error located at the option, never a traceback after the work is done."""
    folder = Path(out).parent
    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise UsageError(f"--out {out}: the folder {folder} {what}; expected an existing "
                         "folder (create it first)", path=out)
    if Path(out).is_dir():
        raise UsageError(f"--out {out} is a folder; expected a file name", path=out)


@trace.command("reproduce")
@click.argument("fixtures", type=click.Path(file_okay=False))
@output_options("reproduce")
def reproduce_cmd(fixtures: str, fmt: str, output: str | None) -> None:
    """Reproduce the research artifact's published gate table from its raw traces.

    Exit 0 only when every row with a published value agrees or carries an explained reason.
    """
    rows = reproduce(fixtures)
    emit("reproduce", fmt, rows, output)
    raise click.exceptions.Exit(0 if succeeded(rows) else 1)


@trace.command("timeline")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Picture to write (.png or .svg).")
def timeline_cmd(traces: tuple[str, ...], out: str) -> None:
    """Draw TRACES as timelines: a lane per request, claim events labelled, each failure
    linked to the outcome it became. Needs the [plot] extra (matplotlib)."""
    from residentkv.report.pictures import timeline_picture
    from residentkv.report.timeline import timeline

    if not out.endswith((".png", ".svg")):
        raise UsageError(f"--out {out}: expected a .png or .svg file name")
    try:
        path = timeline_picture([timeline(t) for t in traces], Path(out))
    except ImportError:
        raise UsageError(f"trace timeline needs matplotlib: {install_hint('plot')}") from None
    click.echo(f"picture: {path}")
