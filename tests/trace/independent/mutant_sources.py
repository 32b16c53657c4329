"""Where mutants come from: the shipped legal traces and the generator's legal traces."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from mutator import shipped_traces

from strategies.traces import build_legal, shapes

SHIPPED = shipped_traces()

Source = tuple[str, list[dict[str, Any]]]


def _generated(shape: Any) -> Source:
    t = build_legal(shape)
    return f"generated {t.describe()}", t.records()


#: half shipped traces, half generated ones (up to three claims, fewer cycles keep them short)
SOURCES: st.SearchStrategy[Source] = st.one_of(
    st.sampled_from(sorted(SHIPPED.items())),
    shapes(max_claims=3).map(_generated),
)
