"""Event emission of the toy runtime: it names itself in every stream it opens."""

from __future__ import annotations

EMITTER = "toyrt.scheduler"


def open_stream(write: object) -> None:
    """Write the stream_started event first, naming this emitter and the runtime release."""
    write("stream_started", emitter={"name": EMITTER, "version": "0.1"},  # type: ignore[operator]
          runtime={"name": "toyrt", "version": "0.1"})
