"""The fuzz harness: run the CLI in-process on one generated input, under a watchdog.

Properties checked on every input:

* the exit code is 0, 1 or 2 — never 101 (an internal error) and never an escaped exception;
* the command returns within :data:`BOUND_S` seconds (a SIGALRM watchdog turns a hang into a
  failure with the input that caused it).

``RESIDENTKV_FUZZ_SECONDS`` (default 0) turns each fuzz test from one short derandomized run
(what ``make test`` does) into repeated randomized runs for that many seconds in total, split
evenly across the fuzz tests (``make fuzz-inputs``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from residentkv.cli import cli
from residentkv.errors import UserInputError

BOUND_S = int(os.environ.get("RESIDENTKV_FUZZ_BOUND_S", "60"))
TOTAL_S = float(os.environ.get("RESIDENTKV_FUZZ_SECONDS", "0"))
#: the number of fuzz tests sharing the long run's time (kept in step with tests/fuzz/)
FUZZ_TESTS = 7
SHORT = settings(max_examples=int(os.environ.get("RESIDENTKV_FUZZ_EXAMPLES", "15")),
                 derandomize=True, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=100, derandomize=False, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


class Hang(AssertionError):
    """A command ran past the bound."""


@contextmanager
def watchdog(seconds: int, what: str) -> Iterator[None]:
    """Fail with :class:`Hang` when the body runs longer than *seconds* (main thread only)."""
    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"{what}: still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(args: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    """Run ``residentkv ARGS``; the exit code as ``main`` would set it, and the output."""
    with watchdog(BOUND_S, " ".join(args)):
        result = CliRunner().invoke(cli, args, input=stdin, catch_exceptions=True)
    exc = result.exception
    if exc is None or isinstance(exc, SystemExit):
        return result.exit_code, result.output
    if isinstance(exc, UserInputError):
        return 2, f"{result.output}{exc}"
    if isinstance(exc, Hang):
        raise exc
    raise AssertionError(f"exit 101 on {args}: {type(exc).__name__}: {exc}") from exc


def assert_no_crash(args: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    code, out = run_cli(args, stdin)
    assert code in (0, 1, 2), f"exit {code} on {args}:\n{out[-2000:]}"
    return code, out


def fuzz(test: Callable[..., None]) -> Callable[..., None]:
    """Apply the short or the long profile to a ``@given`` test (see the module docstring)."""
    if TOTAL_S <= 0:
        return SHORT(test)
    long_test = LONG(test)
    budget = TOTAL_S / FUZZ_TESTS

    def repeat(*args: Any, **kw: Any) -> None:
        end = time.monotonic() + budget
        while time.monotonic() < end:
            long_test(*args, **kw)

    repeat.__name__ = test.__name__
    repeat.__doc__ = test.__doc__
    return repeat


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
