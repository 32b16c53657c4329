"""``residentkv witness run``: the positive systems witness (SPEC §9) on real vLLM.

vLLM and torch are imported only inside the command, so the CLI starts (and ``--help`` works)
on machines without the ``[vllm]`` extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

import residentkv.report.command_reports  # noqa: F401  (registers the witness reporters)
from residentkv.adapters.vllm.control_answers import (
    Answer,
    injection_answer,
    outcome_answer,
    release_answer,
)
from residentkv.adapters.vllm.engine import SHAPES
from residentkv.errors import UsageError, install_hint
from residentkv.jsontext import json_text, write_json
from residentkv.report.registry import emit, output_options
from residentkv.trust.attest import attest_recorded
from residentkv.trust.envelope import load_private_key

__all__ = ["witness"]

ALL = "all"


def _scenario_names() -> tuple[str, ...]:
    # The scenario list lives with the adapter; importing it pulls in no vLLM.
    from residentkv.adapters.vllm.witness import SCENARIOS

    return tuple(SCENARIOS)


@click.group()
def witness() -> None:
    """Run the vLLM witness: ResidentClaims through real offload, load and failure."""


@witness.command("run")
@click.option("--scenario", "scenarios", multiple=True, default=(ALL,), show_default=True,
              help="Scenario to run (repeatable), or 'all'.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs per scenario.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="witness-out",
              show_default=True, help="Directory for traces, logs and summary.json.")
@click.option("--load-mode", type=click.Choice(["async", "sync"]), default="async",
              show_default=True,
              help="async: vLLM's async-load protocol; sync: loads before the forward.")
@click.option("--shape", type=click.Choice(list(SHAPES)), default="inproc",
              show_default=True,
              help="inproc: LLM in this process; mp: LLM with vLLM's default multiprocessing; "
                   "server: vLLM's OpenAI server and the openai client; tp2: the server with "
                   "tensor parallelism 2.")
@click.option("--attest", "attest_key", type=click.Path(dir_okay=False), default=None,
              help="Sign each recorded trace with this ed25519 key (TRACE.intoto.json beside "
                   "it), binding the vLLM distribution installed here.")
@output_options("witness")
def run(scenarios: tuple[str, ...], repeat: int, out_dir: str, load_mode: str, shape: str,
        attest_key: str | None, fmt: str, output: str | None) -> None:
    """Run witness scenarios on vLLM with a tiny local model and judge each trace.

    Exit 0 only when every run of every scenario gave SPEC §9's expected gate results and its
    checks held (e.g. restored output equal to a cold run); 1 otherwise; 2 when vLLM is missing
    or the arguments are wrong.
    """
    known = _scenario_names()
    chosen = list(known) if ALL in scenarios else list(dict.fromkeys(scenarios))
    unknown = [s for s in chosen if s not in known]
    if unknown:
        raise UsageError(
            f"unknown scenario(s): {', '.join(unknown)}; choose from: all, {', '.join(known)}"
        )
    if importlib.util.find_spec("vllm") is None:
        raise UsageError(
            f"vLLM is not installed; install the extra: {install_hint('vllm')}"
        )
    if shape in ("server", "tp2") and importlib.util.find_spec("openai") is None:
        raise UsageError(f"--shape {shape} drives the server with the openai client: "
                         "pip install openai")
    from residentkv.adapters.vllm.witness import run_witness, summarize

    # the key is read before the run, so that a bad key costs no vLLM run
    signer = load_private_key(Path(attest_key)) if attest_key else None
    out = Path(out_dir)
    try:
        runs = run_witness(chosen, repeat, out, load_mode=load_mode, shape=shape)
    except RuntimeError as exc:
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(1) from None
    rows = summarize(runs)
    write_json(out / "summary.json", {"rows": rows, "runs": [r.to_json() for r in runs]},
               indent=1)
    if signer is not None:
        for signed in attest_recorded(
                [Path(r.trace) for r in runs if r.trace and Path(r.trace).is_file()], signer):
            click.echo(f"witness: signed {signed}", err=True)
    emit("witness", fmt, {"rows": rows, "out": str(out)}, output)
    ok = all(r.matched for r in runs)
    raise click.exceptions.Exit(0 if ok else 1)


@witness.group("control")
@click.option("--socket", "socket_path", required=True, type=click.Path(dir_okay=False),
              envvar="RESIDENTKV_CONTROL_SOCKET",
              help="The engine's control socket (control_socket in kv_connector_extra_config).")
@click.pass_context
def control(ctx: click.Context, socket_path: str) -> None:
    """Operator control of a serving engine through its local control socket."""
    from residentkv.adapters.vllm.control_socket import ControlClient

    ctx.obj = ControlClient(socket_path)


def _call(ctx: click.Context, fn: Callable[[Any], Any]) -> Any:
    """The engine's answer to one command (a socket it cannot reach, or a command it refuses,
    is unusable input: exit 2 with the cause)."""
    from residentkv.adapters.vllm.control_answers import unreachable_hint
    from residentkv.adapters.vllm.control_socket import ControlError

    try:
        return fn(ctx.obj)
    except ControlError as exc:
        raise UsageError(unreachable_hint(ctx.obj.path, str(exc))) from None


def _say(answer: Answer) -> None:
    """Print a confirmation on stdout, a failure on stderr; exit 1 when the command did not do
    what it was asked."""
    for line in answer.lines:
        click.echo(line, err=not answer.ok)
    if not answer.ok:
        raise click.exceptions.Exit(1)


@control.command("status")
@click.pass_context
def control_status(ctx: click.Context) -> None:
    """Sink, events written, injections fired, live claims, injection rules."""
    click.echo(json_text(_call(ctx, lambda c: c.status()), indent=1), nl=False)


@control.command("release")
@click.argument("claim_ids", nargs=-1, required=True)
@click.option("--reason", default="operator release", show_default=True)
@click.pass_context
def control_release(ctx: click.Context, claim_ids: tuple[str, ...], reason: str) -> None:
    """End live claims (claim_released) and free their host-tier slots; exit 1 when one of
    them was not live."""
    # one id per command: the answer is a count, and the operator needs to know which
    def release_one(claim_id: str) -> Any:
        return _call(ctx, lambda client: client.release_claims([claim_id], reason))

    _say(release_answer({c: release_one(c) for c in dict.fromkeys(claim_ids)}))


@control.command("inject")
@click.option("--claim-id", default=None)
@click.option("--owner-scope", default=None)
@click.option("--unclaimed", is_flag=True)
@click.option("--mode", type=click.Choice(["once", "persistent", "corrupt"]),
              default="persistent", show_default=True,
              help="once: fail the next load; persistent: fail every load; corrupt: flip the "
                   "stored bytes before the next load reads them (its digest check fails).")
@click.pass_context
def control_inject(ctx: click.Context, claim_id: str | None, owner_scope: str | None,
                   unclaimed: bool, mode: str) -> None:
    """Fail (or corrupt) the next host-tier load(s) of a claim, an owner's claims, or unclaimed
    entries."""
    rule = {"claim_id": claim_id, "owner_scope": owner_scope, "unclaimed": unclaimed,
            "mode": mode}
    _say(injection_answer(rule, _call(ctx, lambda c: c.configure(failure_injection=[rule]))))


@control.command("clear-injection")
@click.pass_context
def control_clear(ctx: click.Context) -> None:
    """Remove every failure-injection rule."""
    _say(injection_answer(None, _call(ctx, lambda c: c.configure(failure_injection=[]))))


@control.command("outcome")
@click.argument("request_id")
@click.pass_context
def control_outcome(ctx: click.Context, request_id: str) -> None:
    """The claim outcome of a request (vLLM's id or the caller's id); exit 1 when the engine
    knows none."""
    outcome = _call(ctx, lambda c: c.outcome_for(request_id))
    _say(outcome_answer(request_id, outcome))
    click.echo(json_text(outcome, indent=1), nl=False)
