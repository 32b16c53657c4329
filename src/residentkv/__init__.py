"""residentkv: checkable ResidentClaims for LLM serving runtimes.

A ResidentClaim is an accepted future-KV reuse obligation. This package gives it a contract
model, one versioned event schema, streaming trace gates that decide what a run really showed,
and a fail-closed lowering checker for mappings onto runtime primitives.
"""

from residentkv.errors import InternalError, ResidentKVError, UsageError, UserInputError

__version__ = "0.1.0"

__all__ = [
    "InternalError",
    "ResidentKVError",
    "UsageError",
    "UserInputError",
    "__version__",
]
