"""Where mutants come from: the shipped legal traces and the generator's legal traces."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from mutator import Mutant, shipped_traces
from rewrites import increasing_labels

from strategies.traces import build_legal, shapes

SHIPPED = shipped_traces()

Source = Mutant  # a legal trace: no edits yet


def _generated(shape: Any) -> Source:
    t = build_legal(shape)
    return Mutant(f"generated {t.describe()}", t.records())


#: half shipped traces, half generated ones (up to three claims, fewer cycles keep them short)
SOURCES: st.SearchStrategy[Source] = st.one_of(
    st.sampled_from([Mutant(name, events) for name, events in sorted(SHIPPED.items())]),
    shapes(max_claims=3).map(_generated),
)


def _generated_legal(shape: Any) -> Source:
    t = build_legal(shape)
    return Mutant(f"generated {t.describe()}, labels increasing",
                  increasing_labels(t.records()))


#: generated traces made legal under SPEC §4.2 (labels increasing along each claim's history)
LEGAL_GENERATED: st.SearchStrategy[Source] = shapes(max_claims=3).map(_generated_legal)
