"""The subscription's sequence tracker: which batches to apply, and every unseen window a gap.

An explicit automaton of data (SPEC §9.2), with no I/O: the subscriber turns what it reads
(messages, a dropped connection, a replay's answer, the end of the run) into :data:`Input`
values, and :meth:`SequenceTracker.step` answers with :data:`Action` values — apply a batch,
write a gap, forget a source's cache state, ask the replay endpoint for a window. Which handler
answers which input in which phase is one table, :data:`TRANSITIONS`.

A *source* is one publisher stream, keyed by ``(topic, data-parallel rank)``: each has its own
numbering (``seq``, unsigned 64-bit, counting from 0 per publisher instance) and its own
*epoch* — the run of batches known to continue each other. An epoch ends at every window the
observer did not see: a first batch above 0, a jump, a number that repeats with other bytes
or goes back (the publisher restarted), a dropped connection, an unreadable message, and the
end of the run. Each such window is a :class:`Gap` and a :class:`Forget` (nothing observed
before it is carried over), unless the replay endpoint fills it *and* the fill is shown to
continue the same publisher epoch: the replay must hold, byte for byte, the last
:data:`PROOF_BATCHES` batches applied in the epoch before the window (as many as the epoch
has) and the live batch that revealed it, all of this source's data-parallel rank. A replay
with nothing received live in the epoch to compare it with — a foreign endpoint, a publisher
that sent nothing — is never accepted, and a batch numbered at or below the last one applied
that arrives over a new connection is a new publisher instance, whatever its bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from residentkv.observe.wire import Batch

#: (topic, data-parallel rank): one publisher's stream
SourceKey = tuple[bytes, int | None]
#: live batches (and their bytes) held back while a replay is awaited; past either bound the
#: replay is given up and the window is a gap
MAX_HELD = 10_000
MAX_HELD_BYTES = 64 << 20
#: the batches of an epoch a replay must hold byte for byte (each is stamped with the
#: publisher's clock, so a restarted publisher cannot repeat them; the batches are kept by
#: reference, at most this many per source)
PROOF_BATCHES = 16


class Cause(StrEnum):
    """Why a window of a runtime's stream was not seen (``observation_gap.reason``)."""

    LATE_START = "late_start"
    SEQUENCE_JUMP = "sequence_jump"
    SUBSCRIPTION_DROPPED = "subscription_dropped"
    PUBLISHER_RESTARTED = "publisher_restarted"
    UNDECODABLE_BATCH = "undecodable_batch"
    MALFORMED_MESSAGE = "malformed_message"
    UNCONFIRMED_TAIL = "unconfirmed_tail"
    PRESENCE_AMBIGUOUS = "presence_ambiguous"


class Phase(StrEnum):
    """Where one source stands."""

    LIVE = "live"                  # applying batches in order
    CATCHING_UP = "catching_up"    # a window was asked from the replay endpoint
    ENDED = "ended"                # the run ended; only a tail replay may still answer


# ------------------------------------------------------------------------------ inputs
@dataclass(frozen=True, slots=True)
class Received:
    """A live batch, decoded."""

    batch: Batch

    @property
    def key(self) -> SourceKey:
        return (self.batch.topic, self.batch.rank)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A message of the subscribed topic that is not a batch: wrong frame count, a sequence
    field that is not 8 bytes or holds the reserved value, an undecodable payload. *seq* is
    known when the sequence field was readable; the rank never is (it is in the payload)."""

    topic: bytes
    seq: int | None
    cause: Cause
    detail: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """The connection to the publisher dropped (it may come back, or another may answer)."""


@dataclass(frozen=True, slots=True)
class Replayed:
    """The replay endpoint's answer for *key*: the batches it sent, and whether it ended with
    the end marker (``complete``) and every frame was readable."""

    key: SourceKey
    start: int
    batches: Sequence[Batch]
    complete: bool


@dataclass(frozen=True, slots=True)
class ReplayFailed:
    """No (complete) answer from the replay endpoint for *key* in time."""

    key: SourceKey
    start: int
    detail: str


@dataclass(frozen=True, slots=True)
class Ended:
    """The run ends (deadline, signal): every source's tail is unconfirmed unless replay
    closes it."""


Input = Received | Unreadable | Dropped | Replayed | ReplayFailed | Ended


# ------------------------------------------------------------------------------ actions
@dataclass(frozen=True, slots=True)
class Apply:
    """Apply *batch* to the observer (it continues the source's epoch)."""

    batch: Batch


@dataclass(frozen=True, slots=True)
class Gap:
    """Batches *first*..*last* of *key* (``None``: not known) were not seen."""

    key: SourceKey | None
    cause: Cause
    first: int | None
    last: int | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Forget:
    """The cache state of *key* (``None``: every source) is unknown from here."""

    key: SourceKey | None


@dataclass(frozen=True, slots=True)
class AskReplay:
    """Ask *key*'s replay endpoint for every buffered batch from *start*."""

    key: SourceKey
    start: int


Action = Apply | Gap | Forget | AskReplay


# ------------------------------------------------------------------------------ state
@dataclass
class Window:
    """A window being asked from the replay endpoint: batches *first*..*last* (``last`` None:
    the tail, everything after *first*), revealed by *trigger* (None at the end of the run)."""

    first: int
    last: int | None
    cause: Cause
    trigger: Batch | None
    #: the batch number the replay was asked from (an answer to another request is ignored)
    asked: int = 0


@dataclass
class Source:
    """One publisher stream's state."""

    key: SourceKey
    phase: Phase = Phase.LIVE
    #: the next batch number this epoch expects (0: nothing applied in the epoch yet)
    expected: int = 0
    #: the last batches applied in this epoch, oldest first (empty: none, or the epoch began
    #: after a gap): what a replay must hold to be shown to continue it
    recent: deque[Batch] = field(default_factory=lambda: deque(maxlen=PROOF_BATCHES))
    dropped: bool = False
    window: Window | None = None
    held: list[Input] = field(default_factory=list)
    held_bytes: int = 0
    #: nothing received yet: a first batch above 0 is a late start
    fresh: bool = True

    @property
    def anchor(self) -> Batch | None:
        """The last batch applied in this epoch."""
        return self.recent[-1] if self.recent else None

    def new_epoch(self) -> None:
        """What was applied before here proves nothing about what follows."""
        self.recent.clear()


Handler = Callable[["SequenceTracker", Source, Input], list[Action]]


class SequenceTracker:
    """The automaton over every source (pure: inputs in, actions out).

    *has_replay* tells whether a source's publisher has a replay endpoint; *topic* is the
    subscribed topic (a source seen before any batch is ``(topic, None)``).
    """

    def __init__(self, has_replay: Callable[[SourceKey], bool], topics: Sequence[bytes] = (b"",)
                 ) -> None:
        self.has_replay = has_replay
        self.topics = tuple(topics)
        self.sources: dict[SourceKey, Source] = {}
        self.ended = False

    # -------------------------------------------------------------------------- dispatch
    def step(self, event: Input) -> list[Action]:
        """The actions answering *event*."""
        if isinstance(event, Dropped):
            for s in self.sources.values():
                s.dropped = True
            return []
        if isinstance(event, Ended):
            return self._end()
        if isinstance(event, Received):
            return self._route(self._source(event.key), event)
        if isinstance(event, Unreadable):
            out: list[Action] = []
            for s in self._sources_of(event.topic):
                out += self._route(s, event)
            return out
        source = self.sources.get(event.key)
        if source is None:                     # an answer nobody asked for
            return []
        return self._route(source, event)

    def _route(self, source: Source, event: Input) -> list[Action]:
        handler = TRANSITIONS.get((source.phase, type(event)))
        return [] if handler is None else handler(self, source, event)

    def _source(self, key: SourceKey) -> Source:
        source = self.sources.get(key)
        if source is None:
            # the pseudo-source of a topic seen before its rank was known hands over its state
            pseudo = self.sources.pop((key[0], None), None) if key[1] is not None else None
            source = self.sources[key] = Source(key) if pseudo is None else pseudo
            source.key = key
        return source

    def _sources_of(self, topic: bytes) -> list[Source]:
        found = [s for k, s in self.sources.items() if k[0] == topic]
        return found or [self._source((topic, None))]

    def pending_replays(self) -> list[SourceKey]:
        """Sources waiting for a replay answer."""
        return [k for k, s in self.sources.items() if s.window is not None]

    # -------------------------------------------------------------------------- live
    def _live_batch(self, s: Source, event: Input) -> list[Action]:
        assert isinstance(event, Received)
        b = event.batch
        if s.fresh:
            s.fresh = False
            if b.seq == 0:
                return self._apply(s, b)
            return self._open(s, 0, b.seq - 1, Cause.LATE_START, b)
        if s.dropped and b.seq < s.expected:
            # a new connection never brings back a batch already applied: whatever its bytes,
            # the numbering started again
            return self._restarted(s, b)
        anchor = s.anchor
        if anchor is not None and b.seq == anchor.seq and b.payload == anchor.payload:
            return []                          # the same batch delivered twice
        if b.seq < s.expected:
            return self._restarted(s, b)
        if s.dropped:
            s.dropped = False
            if b.seq == s.expected and not self.has_replay(s.key):
                return self._unverified_reconnect(s, b)
            return self._open(s, s.expected, b.seq - 1, Cause.SUBSCRIPTION_DROPPED, b)
        if b.seq > s.expected:
            return self._open(s, s.expected, b.seq - 1, Cause.SEQUENCE_JUMP, b)
        return self._apply(s, b)

    def _restarted(self, s: Source, b: Batch) -> list[Action]:
        """A number that goes back, or repeats with other bytes: a new publisher epoch."""
        before = s.expected - 1
        out: list[Action] = [
            Gap(s.key, Cause.PUBLISHER_RESTARTED, s.expected, None,
                f"batch {b.seq} arrived after batch {before}: the publisher's numbering started "
                "again, so whatever it published after that and before this is unknown"),
            Forget(s.key)]
        s.expected, s.dropped = 0, False
        s.new_epoch()
        if b.seq == 0:
            return out + self._apply(s, b)
        return out + self._open(s, 0, b.seq - 1, Cause.PUBLISHER_RESTARTED, b)

    def _unverified_reconnect(self, s: Source, b: Batch) -> list[Action]:
        out: list[Action] = [
            Gap(s.key, Cause.SUBSCRIPTION_DROPPED, None, None,
                f"reconnected at batch {b.seq}: without a replay endpoint nothing shows it "
                "continues the batches before the drop (the publisher may have restarted)"),
            Forget(s.key)]
        s.new_epoch()
        return out + self._apply(s, b)

    def _live_unreadable(self, s: Source, event: Input) -> list[Action]:
        assert isinstance(event, Unreadable)
        seq = event.seq
        s.fresh = False
        if seq is None:
            s.new_epoch()
            return [Gap(s.key, event.cause, None, None, event.detail), Forget(s.key)]
        first = s.expected if seq >= s.expected else seq
        out: list[Action] = [Gap(s.key, event.cause, first, seq, event.detail), Forget(s.key)]
        if seq >= s.expected:
            s.expected = seq + 1
        s.new_epoch()
        return out

    def _apply(self, s: Source, b: Batch) -> list[Action]:
        s.expected = b.seq + 1
        s.recent.append(b)
        return [Apply(b)]

    # -------------------------------------------------------------------------- windows
    def _open(self, s: Source, first: int, last: int, cause: Cause,
              trigger: Batch) -> list[Action]:
        """Batches *first*..*last* were not seen before *trigger*: ask replay, or a gap."""
        if self.has_replay(s.key):
            return self._ask(s, Window(first, last, cause, trigger))
        out: list[Action] = []
        if last >= first:
            out = [Gap(s.key, cause, first, last), Forget(s.key)]
            s.new_epoch()
        return out + self._apply(s, trigger)

    def _ask(self, s: Source, w: Window) -> list[Action]:
        """Ask the replay from the oldest batch kept of the epoch (to compare them), else from
        the window."""
        w.asked = s.recent[0].seq if s.recent else w.first
        s.phase, s.window = Phase.CATCHING_UP, w
        return [AskReplay(s.key, w.asked)]

    def _hold(self, s: Source, event: Input) -> list[Action]:
        s.held.append(event)
        if isinstance(event, Received):
            s.held_bytes += len(event.batch.payload)
        if (len(s.held) <= MAX_HELD and s.held_bytes <= MAX_HELD_BYTES) or s.window is None:
            return []
        return self._replay_failed(s, ReplayFailed(
            s.key, s.window.asked,
            f"more than {MAX_HELD} live batches or {MAX_HELD_BYTES >> 20} MiB arrived while "
            "the replay was awaited"))

    def _replayed(self, s: Source, event: Input) -> list[Action]:
        assert isinstance(event, Replayed) and s.window is not None
        w = s.window
        if event.start != w.asked:
            return []                          # the answer to an abandoned request
        got = {b.seq: b for b in event.batches}
        problem = self._unverified(s, w, got, event.complete)
        if problem:
            return self._replay_failed(s, ReplayFailed(s.key, w.asked, problem))
        out: list[Action] = []
        last = w.last if w.last is not None else max(got, default=w.first - 1)
        # walk the batches the replay holds, never the window's numbers (it may span 2**64)
        expected = w.first
        for seq in sorted(n for n in got if w.first <= n <= last):
            if seq > expected:
                out += self._missing(s, w, expected, seq - 1)
            out += self._apply(s, got[seq])
            expected = seq + 1
        if expected <= last:
            out += self._missing(s, w, expected, last)
        return out + self._close_window(s)

    def _missing(self, s: Source, w: Window, first: int, last: int) -> list[Action]:
        s.new_epoch()
        return [Gap(s.key, w.cause, first, last,
                    "the replay's answer does not hold these batches of this stream (its "
                    "buffer no longer held them, or they were another rank's)"), Forget(s.key)]

    def _unverified(self, s: Source, w: Window, got: dict[int, Batch], complete: bool) -> str:
        """Why the replay's answer cannot be shown to continue this epoch ('' when it can)."""
        for mine in s.recent:
            theirs = got.get(mine.seq)
            if theirs is None or theirs.payload != mine.payload:
                return (f"the replay does not hold batch {mine.seq} as it was applied: it "
                        "cannot be shown to continue the same publisher epoch")
        if not s.recent and w.trigger is None:
            return ("no batch of this stream was received live since its last gap: nothing "
                    "ties the replay endpoint's answer to the subscribed publisher")
        if w.trigger is not None:
            theirs = got.get(w.trigger.seq)
            if theirs is None or theirs.payload != w.trigger.payload:
                return (f"the replay does not hold live batch {w.trigger.seq} as it arrived: it "
                        "comes from another publisher epoch")
        elif not complete:
            return "the replay did not end with its end marker"
        return ""

    def _replay_failed(self, s: Source, event: Input) -> list[Action]:
        assert isinstance(event, ReplayFailed) and s.window is not None
        w = s.window
        if event.start != w.asked:
            return []
        if w.last is not None and w.last < w.first:
            # no number was missed: the connection dropped between two consecutive batches
            gap = Gap(s.key, w.cause, None, None,
                      f"the connection dropped between batch {w.first - 1} and batch "
                      f"{w.first}; {event.detail}")
        else:
            gap = Gap(s.key, w.cause, w.first, w.last, event.detail)
        out: list[Action] = [gap, Forget(s.key)]
        s.new_epoch()
        if w.last is not None:
            s.expected = w.last + 1
        return out + self._close_window(s)

    def _close_window(self, s: Source) -> list[Action]:
        w = s.window
        assert w is not None
        s.window = None
        if w.trigger is None:                  # a tail: the run is over
            s.phase = Phase.ENDED
            return []
        s.phase = Phase.LIVE
        out = self._apply(s, w.trigger)
        held, s.held, s.held_bytes = s.held, [], 0
        for event in held:
            out += self._route(s, event)
        return out

    # -------------------------------------------------------------------------- end
    def _end(self) -> list[Action]:
        self.ended = True
        if not self.sources:
            for topic in self.topics:
                self._source((topic, None))
        out: list[Action] = []
        for s in list(self.sources.values()):
            out += self._route(s, Ended())
        return out

    def _end_live(self, s: Source, event: Input) -> list[Action]:
        first = s.expected
        if self.has_replay(s.key) and s.recent:
            return self._ask(s, Window(first, None, Cause.UNCONFIRMED_TAIL, None))
        s.phase = Phase.ENDED
        why = ("without a replay endpoint nothing shows which batches the publisher sent "
               "after the last one received" if not self.has_replay(s.key) else
               "no batch of this stream was received live since its last gap, so nothing ties "
               "the replay endpoint's answer to the subscribed publisher")
        return [Gap(s.key, Cause.UNCONFIRMED_TAIL, first, None, f"the run ended: {why}")]

    def _end_catching_up(self, s: Source, event: Input) -> list[Action]:
        # the open window's answer may still come: the subscriber gives it the time it has
        s.held.append(event)
        return []


#: (phase, input type) -> handler; a pair not listed is ignored (e.g. a batch after the end)
TRANSITIONS: dict[tuple[Phase, type], Handler] = {
    (Phase.LIVE, Received): SequenceTracker._live_batch,
    (Phase.LIVE, Unreadable): SequenceTracker._live_unreadable,
    (Phase.LIVE, Ended): SequenceTracker._end_live,
    (Phase.CATCHING_UP, Received): SequenceTracker._hold,
    (Phase.CATCHING_UP, Unreadable): SequenceTracker._hold,
    (Phase.CATCHING_UP, Replayed): SequenceTracker._replayed,
    (Phase.CATCHING_UP, ReplayFailed): SequenceTracker._replay_failed,
    (Phase.CATCHING_UP, Ended): SequenceTracker._end_catching_up,
}
