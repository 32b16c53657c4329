"""Importers of foreign trace dialects into ``residentkv.event/v1``.

An importer maps a foreign vocabulary without changing its meaning: what cannot be mapped is
dropped *and reported*, and any synthesized event is listed in the import report.
"""

from __future__ import annotations

from residentkv.trace.importers.base import ImportReport, ImportResult
from residentkv.trace.importers.resident_kv_artifact import import_artifact_trace

DIALECTS = {"resident-kv-artifact": import_artifact_trace}

__all__ = ["DIALECTS", "ImportReport", "ImportResult", "import_artifact_trace"]
