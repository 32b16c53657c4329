import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from residentkv.audit import job as audit_job
from residentkv.cli import main
from residentkv.sources import PINS, cache_dir, fetch, find_archive

# Property tests judge behaviour, never speed: no per-example deadline (CI machines are shared),
# and a fixed derandomized run so a failure reproduces.
settings.register_profile("residentkv", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
# `make fuzz-gates`: long randomized runs of the differential properties (a new seed each run;
# failures are kept in the example database and printed with a reproduction blob).
settings.register_profile("fuzz", deadline=None, derandomize=False, print_blob=True,
                          max_examples=int(os.environ.get("RESIDENTKV_FUZZ_EXAMPLES", "50000")),
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("residentkv")

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))

TRACES = Path(__file__).parent.parent / "src" / "residentkv" / "data" / "traces"


@pytest.fixture
def traces_dir() -> Path:
    return TRACES


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``residentkv ARGS`` in-process: (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        out, err = capsys.readouterr()
        return int(exc.value.code or 0), out, err

    return run


@pytest.fixture(scope="session")
def pinned_cache() -> Path:
    """The release cache holding every pinned archive.

    `make test` runs `residentkv sources fetch` first; with RESIDENTKV_FETCH=1 this fixture
    fetches what is missing itself. Outside CI a missing archive skips with the reason; in CI it
    fails, because CI must verify the curated anchors for real.
    """
    cache = cache_dir()
    missing = [p for p in PINS if find_archive(cache, p) is None]
    if missing and os.environ.get("RESIDENTKV_FETCH") == "1":
        fetch(missing, cache)
        missing = [p for p in PINS if find_archive(cache, p) is None]
    if missing:
        reason = (f"pinned releases not in the cache {cache}: "
                  f"{', '.join(p.requirement for p in missing)}; run `residentkv sources "
                  "fetch` (or set RESIDENTKV_FETCH=1)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return cache


def suite_not_run() -> dict[str, object]:
    """The audit's suite summary when a test is not about the suite (tested on its own, in
    tests/suite and tests/audit/test_audit_job.py): a full suite run is half a minute."""
    return {"available": True, "passed": True, "detail": "suite: (not run in this test)",
            "lines": []}


@pytest.fixture(scope="session")
def suite_stub() -> Callable[[], dict[str, object]]:
    """:func:`suite_not_run`, for a fixture wider than one test (no monkeypatch there)."""
    return suite_not_run


@pytest.fixture
def no_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the suite out of the audit's verdict in this test."""
    monkeypatch.setattr(audit_job, "suite_summary", suite_not_run)
