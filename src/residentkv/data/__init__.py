"""Data files shipped with residentkv, read with importlib.resources."""

from __future__ import annotations

from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path


def data_root() -> Traversable:
    """The package's data folder."""
    return files("residentkv.data")


def example_trace(name: str) -> Path:
    """Filesystem path of a bundled example trace (the package is installed unzipped)."""
    with as_file(data_root() / "traces" / name) as path:
        return Path(path)


EXAMPLE_TRACES: dict[str, tuple[str, ...]] = {
    # example trace -> the gates it is written to pass (it must fail the others)
    "success_path.jsonl": ("observation",),
    "claimed_load_failure.jsonl": ("failure_outcome",),
    "two_claim_attribution.jsonl": ("failure_outcome", "attribution"),
    "lifecycle_two_generations.jsonl": ("observation", "failure_outcome", "lifecycle"),
    "expiring_release_before_loss.jsonl": ("lifecycle",),
    "hard_protected_conflict.jsonl": ("lifecycle",),
}
