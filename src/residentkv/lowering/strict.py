"""``check --strict``: what a CI gate refuses beyond the default exit code.

The default run exits 0 when every row has its expected class, even when nothing was verified
(no ``--source``) or an anchor drifted (a warning). Under ``--strict`` each of these also makes
the run fall short (exit 1): a drifted anchor, a warning of any kind, and an anchor that is only
cited (unverifiable here) in a granting row — one whose class, expectation or conformance
assertion is a granting class. Decided on the canonical check JSON, so every report agrees.
"""

from __future__ import annotations

from typing import Any

from residentkv.model.vocabulary import GRANTING_CLASSES


def _granting(row: dict[str, Any]) -> bool:
    return (row["class"] in GRANTING_CLASSES or row.get("expect") in GRANTING_CLASSES
            or row.get("asserts") == "conformance")


def strict_shortfalls(doc: dict[str, Any]) -> list[str]:
    """One sentence per reason ``--strict`` refuses this result (empty: strict passes)."""
    out: list[str] = []
    for row in doc["rows"]:
        for a in row["anchors"]:
            if a["result"] == "drifted":
                out.append(f"{row['id']}: anchor {a['id']} drifted ({a['detail']})")
            elif a["result"] == "unverifiable" and _granting(row):
                out.append(f"{row['id']}: anchor {a['id']} ({a['kind']}) is only cited in a "
                           f"granting row ({a['detail']})")
        for f in row["findings"]:
            if f["severity"] == "warning" and f["code"] != "A001":
                out.append(f"{row['id']}: warning {f['code']} {f['name']}: {f['message']}")
    return out


def strict_exit_code(doc: dict[str, Any]) -> int:
    """The exit code under ``--strict``: the default one, raised to 1 by any shortfall."""
    return max(int(doc["exit_code"]), 1 if strict_shortfalls(doc) else 0)
