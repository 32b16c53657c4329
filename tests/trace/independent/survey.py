"""Tally the gates' disagreements with the independent acceptor over random mutants.

Not a test: a figure for a reader. ``python tests/trace/independent/survey.py [N]`` (with the
package's ``src`` and ``tests`` on ``PYTHONPATH``) prints, per (gate, rule) category, how many
gate passes the acceptor contradicts, with one shrunk-by-hand example each.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from compare import disagreements, gate_passes, tally  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from mutant_sources import SOURCES  # noqa: E402
from mutator import Mutant, mutants  # noqa: E402


def main(count: int) -> None:
    seen: dict[str, tuple[Mutant, str]] = {}
    found: list = []
    checks = [0]

    @settings(max_examples=count, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(mutants(SOURCES))
    def run(m: Mutant) -> None:
        data = m.data()
        checks[0] += len(gate_passes(data))
        ds = disagreements(data)
        found.extend(ds)
        for d in ds:
            if d.category() not in seen or len(m.events) < len(seen[d.category()][0].events):
                seen[d.category()] = (m, str(d))

    run()
    print(f"{count} mutants, {checks[0]} gate passes, {len(found)} contradicted")
    for category, n in tally(found).most_common():
        m, why = seen[category]
        print(f"\n== {category}: {n}\n   {why}\n   {m!r}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
