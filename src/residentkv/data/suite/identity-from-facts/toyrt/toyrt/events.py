"""Event emission of the toy runtime (suite test data): it names itself in every stream."""

EMITTER = "toyrt.scheduler"


def open_stream(write: object) -> None:
    """Write stream_started first, naming this emitter and the runtime release."""
    write("stream_started", emitter={"name": EMITTER, "version": "0.1"},  # type: ignore[operator]
          runtime={"name": "toyrt", "version": "0.1"})
