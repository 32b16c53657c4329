"""``residentkv audit``: the main job over the curated runtime descriptors.

Fetch the pinned releases if missing, verify every anchor, run (or reuse) the witness traces of
the adapter rows, run the bad-lowering suite when this build has one, classify every row, and
write ``report.md``, ``report.json`` (the JSON of ``residentkv check --format json`` plus each
obligation's curator note and each anchor's target), ``report.sarif`` and ``audit.json`` to one
output folder, each rendered by the reporter registry (:data:`residentkv.audit.job.AUDIT_FILES`).
"""

from __future__ import annotations

from residentkv.audit.job import AuditOptions, run_audit
from residentkv.report.audit_result import AuditResult
from residentkv.report.runtime_matrix import runtime_matrix

__all__ = ["AuditOptions", "AuditResult", "run_audit", "runtime_matrix"]
