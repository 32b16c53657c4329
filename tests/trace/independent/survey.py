"""Tally the gates' disagreements with the independent acceptor over random mutants.

Not a test: a figure for a reader. ``python tests/trace/independent/survey.py [N]`` (with the
package's ``src`` and ``tests`` on ``PYTHONPATH``) prints, per (gate, rule) category, how many
gate passes the acceptor contradicts, with one shrunk-by-hand example each.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from compare import disagreements, gate_passes  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from mutant_sources import SOURCES  # noqa: E402
from mutator import Mutant, mutants  # noqa: E402


def main(count: int) -> None:
    seen: dict[str, tuple[Mutant, str]] = {}
    categories: Counter[str] = Counter()
    totals = {"passes": 0, "contradicted": 0, "by_text": 0, "mutants_with": 0}

    @settings(max_examples=count, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(mutants(SOURCES))
    def run(m: Mutant) -> None:
        data = m.data()
        totals["passes"] += len(gate_passes(data))
        found = disagreements(data, readings=True)
        per_pass: dict[tuple[str, str], set[str]] = {}
        for d in found:
            per_pass.setdefault((d.gate, d.claim_id), set()).add(d.category())
            c = d.category()
            if c not in seen or len(m.edits) < len(seen[c][0].edits):
                seen[c] = (m, str(d))
        totals["contradicted"] += len(per_pass)
        totals["by_text"] += sum(any("(reading)" not in c for c in cats)
                                 for cats in per_pass.values())
        totals["mutants_with"] += bool(per_pass)
        for cats in per_pass.values():
            categories.update(cats)

    run()
    print(f"{count} mutants; {totals['passes']} gate passes, {totals['contradicted']} of them "
          f"contradicted by the acceptor ({totals['by_text']} by the SPEC's text, the rest by "
          f"readings only; in {totals['mutants_with']} mutants); per gate:rule "
          "category (readings marked), the gate passes it contradicts, and the example with the "
          "fewest edits:")
    for category, n in categories.most_common():
        m, why = seen[category]
        print(f"\n== {category}: {n}\n   {why}\n   {m!r}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
