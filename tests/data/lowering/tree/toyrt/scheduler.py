"""The toy runtime's scheduler: the module that opens the toy runtime's event streams (its
emitter, ``toyrt.scheduler``, ships in the toyrt distribution: see its RECORD)."""

from toyrt.events import open_stream

__all__ = ["open_stream"]
