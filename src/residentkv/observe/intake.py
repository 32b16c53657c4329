"""A raw message as the sequence tracker's input (pure: bytes in, a value out).

A live message is ``[topic, seq, payload]``; a replay frame the same after the ROUTER's empty
delimiter. The topic must equal the subscribed one exactly (ZeroMQ filters by prefix: a longer
topic is another stream and is ignored). Anything else of the subscribed topic — another frame
count, a sequence field that is not 8 bytes or holds the reserved end marker, a payload that is
not a batch of the dialect — is :class:`~residentkv.observe.sequence.Unreadable`: a gap, never a
skip and never an exception.

The subscription reads a message frame by frame (:func:`recv_frames`): it keeps the first
frames a message of the format has and drops any further frame as it is read, so a message of
many frames costs the observer no more than one of three (ZeroMQ itself delivers a message only
whole: its frames are bounded one by one, by ``MAXMSGSIZE``, never their number).
"""

from __future__ import annotations

from collections.abc import Sequence

import zmq

from residentkv.observe.lazy import decode_sglang_lazy, decode_vllm_lazy
from residentkv.observe.sequence import Cause, Received, Unreadable
from residentkv.observe.wire import END_SEQ, Batch, Dialect, PayloadDecoder, WireError, read_seq

DECODERS: dict[Dialect, PayloadDecoder] = {Dialect.VLLM: decode_vllm_lazy,
                                           Dialect.SGLANG: decode_sglang_lazy}
_PARTS = 3


def recv_frames(sock: zmq.Socket, keep: int = _PARTS) -> tuple[list[bytes], int]:  # type: ignore[type-arg]
    """One message from *sock* (raises ``zmq.Again`` when none is waiting): its first *keep*
    frames and its frame count; every frame past *keep* is dropped as soon as it is read."""
    parts = [sock.recv(zmq.NOBLOCK)]
    count = 1
    while sock.getsockopt(zmq.RCVMORE):
        if count < keep:
            parts.append(sock.recv())
        else:
            sock.recv(copy=False)              # read and let go: never held with the rest
        count += 1
    return parts, count


def decode_payload(dialect: Dialect, topic: bytes, seq: int, payload: bytes) -> Batch:
    """Decode one batch's payload; anything that is not a batch raises :class:`WireError`.

    Nothing else escapes: a payload nested past the decoder's recursion limit, a wrong type, a
    bad tag or a value out of range is one unreadable batch.
    """
    try:
        ts, events, rank = DECODERS[dialect](payload)
    except WireError:
        raise
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        raise WireError(f"payload is not a {dialect.value} KVEventBatch: "
                        f"{type(e).__name__}: {str(e)[:200]}") from None
    return Batch(topic, seq, payload, ts, rank, events)


def read_message(parts: Sequence[bytes], topic: bytes, dialect: Dialect,
                 frames: int | None = None) -> Received | Unreadable | None:
    """One live message as the tracker's input; None for another topic's message. *frames* is
    the message's frame count when only its first frames were kept (:func:`recv_frames`)."""
    if not parts or parts[0] != topic:
        return None
    count = len(parts) if frames is None else frames
    if count != _PARTS:
        return Unreadable(topic, None, Cause.MALFORMED_MESSAGE,
                          f"a message of {count} frames; expected [topic, seq, payload]")
    try:
        seq = read_seq(parts[1])
    except WireError as e:
        return Unreadable(topic, None, Cause.MALFORMED_MESSAGE, str(e))
    try:
        return Received(decode_payload(dialect, topic, seq, parts[2]))
    except WireError as e:
        return Unreadable(topic, seq, Cause.UNDECODABLE_BATCH, str(e))


def is_end(parts: Sequence[bytes]) -> bool:
    """The replay endpoint's end marker ``[b"", END_SEQ, b""]`` (after the delimiter)."""
    return len(parts) == _PARTS and parts[0] == b"" and parts[1] == END_SEQ


def read_replayed(parts: Sequence[bytes], topic: bytes, dialect: Dialect,
                  frames: int | None = None) -> Batch | None:
    """One replayed batch, or None when the frame is not one of *topic*'s batches."""
    got = read_message(parts, topic, dialect, frames)
    return got.batch if isinstance(got, Received) else None
