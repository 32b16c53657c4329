"""``residentkv chaos``: claims under load and faults against a vLLM deployment.

``chaos run`` starts the documented server (or attaches to one on 127.0.0.1), drives seeded
concurrent clients and a seeded nemesis, and judges what the clients saw against the engine's
event sink; ``chaos check`` judges a recorded run folder again. vLLM and the ``openai`` client
are imported only inside the commands, so the CLI starts without them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from residentkv.adapters.vllm.chaos.model import FaultKind, History
from residentkv.errors import UsageError, UserInputError
from residentkv.report import chaos_html, chaos_report  # noqa: F401  (registers the reporters)
from residentkv.report.registry import emit, output_options, render

__all__ = ["chaos"]

ALL = "all"
NONE = "none"


def _faults(chosen: tuple[str, ...]) -> tuple[FaultKind, ...]:
    if NONE in chosen:
        if len(chosen) > 1:
            raise UsageError("--fault none cannot be combined with other faults")
        return ()
    if ALL in chosen:
        return tuple(FaultKind)
    return tuple(dict.fromkeys(FaultKind(c) for c in chosen))


def _require(module: str, why: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise UsageError(why)


def _finish(verdict: dict[str, Any], fmt: str, output: str | None, folder: Path) -> None:
    """Write the page beside the run's files, report, and exit with the verdict."""
    (folder / "chaos.html").write_text(render("chaos", "html", verdict), encoding="utf-8")
    emit("chaos", fmt, verdict, output)
    raise click.exceptions.Exit(0 if verdict["passed"] else 1)


@click.group()
def chaos() -> None:
    """Claims under load and faults: a generator, a nemesis and a history checker."""


@chaos.command("run")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="chaos-out",
              show_default=True,
              help="Folder for trace.jsonl, history.json, chaos.json, chaos.html, logs.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the clients' plans and the fault schedule.")
@click.option("--clients", type=click.IntRange(min=1, max=64), default=4, show_default=True,
              help="Concurrent clients.")
@click.option("--tenants", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--sessions", type=click.IntRange(min=1), default=3, show_default=True,
              help="Sessions per tenant (one claim at a time each).")
@click.option("--requests", "ops", type=click.IntRange(min=1), default=600, show_default=True,
              help="Most client requests in the run.")
@click.option("--duration", type=click.FloatRange(min=1.0), default=120.0, show_default=True,
              help="Seconds of load (restarts included).")
@click.option("--rate", type=click.FloatRange(min=0.0), default=3.0, show_default=True,
              help="Requests per second per client (seeded think times).")
@click.option("--stream-share", type=click.FloatRange(0.0, 1.0), default=0.3,
              show_default=True, help="Share of streamed requests.")
@click.option("--fault", "faults", multiple=True, default=(ALL,), show_default=True,
              type=click.Choice([ALL, NONE, *(k.value for k in FaultKind)]),
              help="Nemesis fault to schedule (repeatable), 'all' or 'none'.")
@click.option("--faults-per-kind", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--pressure-burst", type=click.IntRange(min=1), default=16, show_default=True,
              help="Registrations of one host-tier pressure fault.")
@click.option("--device-blocks", type=click.IntRange(min=4), default=16, show_default=True,
              help="vLLM KV cache blocks of the started server (--num-gpu-blocks-override).")
@click.option("--host-tier-bytes", type=click.IntRange(min=1), default=4 << 20,
              show_default=True, help="The started server's host tier.")
@click.option("--shutdown-timeout", type=click.IntRange(min=0), default=30, show_default=True,
              help="The started server's --shutdown-timeout: > 0 makes SIGTERM a graceful "
                   "stop (vLLM drains); 0 (vLLM's default) kills the EngineCore at once.")
@click.option("--url", default=None, help="Attach to this server (http://127.0.0.1:PORT) "
              "instead of starting one; needs --control-socket.")
@click.option("--control-socket", default=None, type=click.Path(dir_okay=False),
              help="The attached server's control socket (its sink is read from it).")
@output_options("chaos")
def run(out_dir: str, seed: int, clients: int, tenants: int, sessions: int, ops: int,
        duration: float, rate: float, stream_share: float, faults: tuple[str, ...],
        faults_per_kind: int, pressure_burst: int, device_blocks: int, host_tier_bytes: int,
        shutdown_timeout: int, url: str | None, control_socket: str | None, fmt: str,
        output: str | None) -> None:
    """Drive a vLLM deployment with claimed sessions under a fault schedule and judge it.

    Exit 0 only when every figure that must be zero is zero and gate conformance passes on
    the sink; 1 otherwise (the report says which figures); 2 for usage errors, a missing
    vLLM or openai client, or a server that cannot be started.
    """
    if (url is None) != (control_socket is None):
        raise UsageError("--url and --control-socket go together (attach to a running server)")
    kinds = _faults(faults)
    _require("openai", "the chaos clients are the official openai client: pip install openai")
    if url is None:
        _require("vllm", "vLLM is not installed; install the extra: "
                         "pip install 'residentkv[vllm]'")
    from residentkv.adapters.vllm.chaos.deployment import ServerShape
    from residentkv.adapters.vllm.chaos.generator import Workload
    from residentkv.adapters.vllm.chaos.run import Attach, ChaosConfig, run_chaos

    config = ChaosConfig(
        workload=Workload(seed=seed, clients=clients, tenants=tenants,
                          sessions_per_tenant=sessions, ops=ops, rate_per_client=rate,
                          stream_share=stream_share),
        duration_s=duration, faults=kinds, faults_per_kind=faults_per_kind,
        pressure_burst=pressure_burst)
    attach = Attach(url, control_socket) if url and control_socket else None
    try:
        _, verdict = run_chaos(config, out_dir, attach=attach,
                               shape=ServerShape(device_blocks=device_blocks,
                                                 host_tier_bytes=host_tier_bytes,
                                                 shutdown_timeout_s=shutdown_timeout))
    except RuntimeError as exc:
        raise UsageError(f"the server could not be run: {exc}") from None
    _finish(verdict, fmt, output, Path(out_dir))


def read_history(folder: Path) -> History:
    """The ``history.json`` of a run folder (C013 when it cannot be read)."""
    path = folder / "history.json"
    try:
        return History.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UserInputError(f"cannot read: {exc.strerror or exc}", code="C013",
                             path=str(path)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise UserInputError(f"{where}: {first['msg']}", code="C013", path=str(path)) from None


@chaos.command("check")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--sink", default=None, type=click.Path(dir_okay=False),
              help="The event sink (default: the one history.json names).")
@output_options("chaos")
def check(folder: str, sink: str | None, fmt: str, output: str | None) -> None:
    """Judge a recorded run FOLDER (its history.json) against its event sink again.

    Exit codes as for chaos run.
    """
    from residentkv.adapters.vllm.chaos.history import check_history

    history = read_history(Path(folder))
    path = sink or history.sink
    if not Path(path).is_file():
        raise UsageError(f"{path}: the run's event sink is not there (give --sink)", path=path)
    _finish(check_history(history, path, str(Path(folder) / "history.json")), fmt, output,
            Path(folder))
