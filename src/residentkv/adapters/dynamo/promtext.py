"""Prometheus text exposition, parsed just enough for the fleet summary (pure).

Not ``prometheus_client.parser``: it renames every sample of a counter to ``<name>_total``
(Dynamo exposes the counter ``dynamo_component_kv_cache_events_applied`` without the suffix,
so the readiness check would never see it), and one line it cannot parse loses the whole
scrape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Sample", "parse", "total"]

_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse(text: str) -> list[Sample]:
    """Every sample line of *text* (comments and unparsable lines are skipped)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m.group(3) or ""))
        out.append(Sample(m.group(1), labels, value))
    return out


def total(samples: Iterable[Sample], name: str, **labels: str) -> float:
    """Sum of the samples called *name* whose labels include *labels*."""
    return sum(s.value for s in samples if s.name == name
               and all(s.labels.get(k) == v for k, v in labels.items()))
