"""The ``residentkv`` command line: a thin shell.

:func:`main` owns the exit codes of SPEC §7 — 0 success, 1 evaluated and fell short, 2 input
could not be evaluated, 101 internal error — and turns any stray exception into 101 with a short
message (the traceback only under ``--traceback``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

import click

from residentkv import __version__
from residentkv.commands import explain, schema, trace
from residentkv.errors import InternalError, ResidentKVError, UserInputError

EXIT_OK = 0
EXIT_FELL_SHORT = 1
EXIT_UNUSABLE = 2
EXIT_INTERNAL = 101


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="residentkv")
@click.option("--traceback", "show_traceback", is_flag=True,
              help="Print tracebacks of internal errors.")
@click.pass_context
def cli(ctx: click.Context, show_traceback: bool) -> None:
    """Checkable ResidentClaims: trace gates and a fail-closed lowering checker."""
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = show_traceback
    if show_traceback:
        os.environ["RESIDENTKV_TRACEBACK"] = "1"


cli.add_command(trace.trace)
cli.add_command(schema.schema)
cli.add_command(explain.explain)


def _register_optional() -> None:
    """Command groups of later layers register here; each import is cheap (no torch/vLLM)."""
    from residentkv.commands import registry

    for command in registry.extra_commands():
        cli.add_command(command)


_register_optional()


def _escape_unencodable() -> None:
    """User text may hold lone surrogates (``"\\ud800"`` in a JSON claim id): print them
    escaped instead of failing with UnicodeEncodeError half-way through a report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            # a closed or detached stream: nothing to change
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and map every outcome to a documented exit code."""
    args = sys.argv[1:] if argv is None else argv
    show_tb = "--traceback" in args
    _escape_unencodable()
    try:
        code = cli.main(args=args, prog_name="residentkv", standalone_mode=False)
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        code = EXIT_UNUSABLE
    except click.ClickException as e:
        e.show()
        code = EXIT_UNUSABLE
    except UserInputError as e:
        click.echo(str(e), err=True)
        code = EXIT_UNUSABLE
    except (InternalError, ResidentKVError) as e:
        click.echo(f"internal error[{e.code}]: {e.message}", err=True)
        if show_tb:
            traceback.print_exc()
        code = EXIT_INTERNAL
    except BrokenPipeError:
        code = EXIT_OK
    except Exception as e:
        click.echo(f"internal error[E101]: {type(e).__name__}: {e}", err=True)
        click.echo("help: rerun with --traceback and report the output", err=True)
        if show_tb:
            traceback.print_exc()
        code = EXIT_INTERNAL
    sys.exit(code if isinstance(code, int) else EXIT_OK)
