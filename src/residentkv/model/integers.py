"""The integer ranges of the contract and the event schema (SPEC §4.2).

Every integer of an event or a claim is signed 64-bit; a value out of range is a typing problem,
never silently carried as a Python big integer.
"""

from __future__ import annotations

from typing import Annotated

import annotated_types

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: a signed 64-bit integer
I64 = Annotated[int, annotated_types.Ge(INT64_MIN), annotated_types.Le(INT64_MAX)]
#: a 64-bit integer whose field gives its own lower bound (two lower bounds would conflict)
Bounded64 = Annotated[int, annotated_types.Le(INT64_MAX)]
