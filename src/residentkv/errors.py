"""Exception tree of residentkv.

::

    ResidentKVError                 base of everything this package raises on purpose
    ├── UserInputError              bad input from the user: exit code 2, never a traceback
    │   ├── UsageError              bad command-line arguments or options
    │   └── TraceReadError          a trace file that cannot be read at all
    ├── IllegalTransition           a claim lifecycle transition that the contract forbids
    └── InternalError               a bug in residentkv: exit code 101

Findings about the *content* of user data (an unknown event type on line 7, a gate that fails)
are values, not exceptions: they are collected and reported together.
"""

from __future__ import annotations


class ResidentKVError(Exception):
    """Base class of every exception residentkv raises deliberately."""

    code: str = "E101"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class UserInputError(ResidentKVError):
    """The user's input cannot be evaluated (exit code 2)."""

    code = "L001"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        path: str | None = None,
        line: int | None = None,
        col: int | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.path = path
        self.line = line
        self.col = col

    @property
    def location(self) -> str:
        """``path:line:col`` with the parts that are known."""
        parts = [p for p in (self.path, self.line, self.col) if p is not None]
        return ":".join(str(p) for p in parts)

    def __str__(self) -> str:
        from residentkv.codes import CODES  # late: codes imports nothing, but keep errors leaf

        entry = CODES.get(self.code)
        tag = f"{self.code} {entry.name}" if entry else self.code
        head = f"error[{tag}]: {self.message}"
        return f"{self.location}: {head}" if self.location else head


class UsageError(UserInputError):
    """Bad command-line usage (exit code 2)."""

    code = "L002"


class TraceReadError(UserInputError):
    """A trace file that cannot be read at all: missing, a directory, binary, empty."""

    code = "T010"


class IllegalTransition(ResidentKVError):
    """A lifecycle transition the contract forbids; names both states.

    Raised by the state machine itself; in a trace it is reported through the lifecycle gate's
    ``legal_transitions`` requirement rather than as an error.
    """

    code = "E101"

    def __init__(self, claim_id: str, from_state: str | None, to_state: str) -> None:
        src = from_state if from_state is not None else "(none)"
        super().__init__(
            f"claim {claim_id!r}: illegal lifecycle transition {src} -> {to_state}"
        )
        self.claim_id = claim_id
        self.from_state = from_state
        self.to_state = to_state


def install_hint(extra: str) -> str:
    """How to install an optional extra: residentkv is installed from a clone, not an index."""
    return (f"pip install -e '.[{extra}]' in a clone of residentkv "
            "(docs/concepts.md#install-from-a-clone)")


class InternalError(ResidentKVError):
    """A bug in residentkv (exit code 101)."""

    code = "E101"
