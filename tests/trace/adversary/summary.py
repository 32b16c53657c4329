"""Print, per class, which adversarial cases the gates on PYTHONPATH get wrong.

``PYTHONPATH=src python tests/trace/adversary/summary.py`` — the same comparison as
``test_adversary.py``, grouped: false passes (a gate passed where SPEC says fail), false fails,
negative controls that did not fire, reader-problem mismatches; cases whose expectation rests on
a fail-closed reading of an ambiguous SPEC sentence are marked ``(ambiguous)``.
"""

from __future__ import annotations

import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_adversary import CASES, HERE, judge, mismatches


def kind(message: str) -> str:
    if "expected fail, got pass" in message:
        return "false pass"
    if "expected pass" in message:
        return "false fail"
    if "controls" in message:
        return "control missed"
    return "other"


def main() -> None:
    by_class: dict[str, list[str]] = defaultdict(list)
    cells: dict[str, int] = defaultdict(int)
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            work = Path(tmp) / case["name"]
            work.mkdir()
            found, problems, codes = judge(HERE / case["file"], case, work)
            bad = mismatches(case, found, problems, codes)
            if not bad:
                continue
            wrong += 1
            for b in bad:
                cells[kind(b)] += 1
            flag = " (ambiguous)" if "ambiguous" in case else ""
            by_class[case["class"]].append(f"{case['name']}{flag}: " + "; ".join(bad))
    print(f"{wrong}/{len(CASES)} cases disagree; cells: " +
          ", ".join(f"{k} {v}" for k, v in sorted(cells.items())))
    for cls in sorted(by_class):
        print(f"\n## {cls} ({len(by_class[cls])})")
        for line in by_class[cls]:
            print(f"- {line}")


if __name__ == "__main__":
    main()
