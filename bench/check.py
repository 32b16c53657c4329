"""Benchmark the lowering checker: rows/s through classify, anchors/s against vLLM's sources.

Prints figures only; asserts nothing about time. Run: python bench/check.py [--rows N]
[--anchors N] [--site-packages DIR]. The row bench cites one shared trace from every row, so
gate results come from the (trace sha256, gate, claim) cache after the first row.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from residentkv.lowering.anchors import Verifier, make_anchor, python_symbols
from residentkv.lowering.bundles import OBLIGATIONS, load_bundles
from residentkv.lowering.check import run_check
from residentkv.lowering.classify import classify
from residentkv.lowering.descriptor import Row, SourceAnchor
from residentkv.lowering.sources import open_root

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "lowering" / "traces" / "witness.jsonl"
STATUSES = ("satisfied", "partial", "absent", "unknown")
GATES = ("observation", "failure_outcome", "lifecycle")


def gen_row(i: int, rnd: random.Random) -> dict[str, Any]:
    """One row citing the shared trace under three gates and a doc quote."""
    anchors = {g: {"kind": "trace", "path": "witness.jsonl", "gate": g, "claim": "c-1"}
               for g in GATES}
    anchors["d"] = {"kind": "doc", "url": "https://example.invalid", "quote": "q"}
    ids = list(anchors)
    obligations = {o: {"status": rnd.choice(STATUSES), "evidence": rnd.sample(ids, 2)}
                   for o in OBLIGATIONS}
    for o in OBLIGATIONS:  # every anchor cited at least once
        cited = set(obligations[o]["evidence"]) | {ids[OBLIGATIONS.index(o)]}
        obligations[o]["evidence"] = sorted(cited)
    return {"id": f"gen/{i}", "runtime": {"name": "gen", "version": "1"}, "mode": "generated",
            "mechanism": rnd.choice(("native", "adapter", "patch")),
            "lowers": rnd.choice(("offloadable", "soft_priority", "hard_protected")),
            "asserts": rnd.choice(("conformance", "substrate")), "obligations": obligations,
            "anchors": anchors, "boundary": "generated row"}


def bench_rows(n: int, e2e: int, workdir: Path) -> None:
    shutil.copy(TRACE, workdir / "witness.jsonl")
    rnd = random.Random(7)
    raw = [gen_row(i, rnd) for i in range(n)]
    rows = [Row.model_validate(r) for r in raw]
    bundles = load_bundles()
    t0 = time.perf_counter()
    verifier = Verifier()
    classes: dict[str, int] = {}
    for row in rows:
        results = {a: verifier.verify(a, anchor, workdir) for a, anchor in row.anchors.items()}
        k = classify(row, results, bundles[row.lowers]).klass
        classes[k] = classes.get(k, 0) + 1
    dt = time.perf_counter() - t0
    print(f"classify: {n} rows in {dt:.3f} s = {n / dt:,.0f} rows/s "
          f"(verify+classify, models prebuilt; gate runs: {len(verifier._gates)})")
    print(f"  classes: {dict(sorted(classes.items()))}")
    if e2e <= 0:
        return
    raw = raw[:e2e]
    path = workdir / "gen.yaml"
    yaml = YAML()
    yaml.default_flow_style = None  # leaf mappings in flow style, as curated descriptors are
    yaml.width = 200
    with path.open("w") as fh:
        yaml.dump({"schema": "residentkv.descriptor/v1", "rows": raw}, fh)
    t0 = time.perf_counter()
    result = run_check([path])
    dt = time.perf_counter() - t0
    print(f"check end to end (YAML load with locations + verify + classify): {len(result.rows)} "
          f"rows, {path.stat().st_size / 1e6:.1f} MB, in {dt:.3f} s = "
          f"{len(result.rows) / dt:,.0f} rows/s")


def collect_anchors(site: Path, n: int) -> list[SourceAnchor]:
    """n symbol anchors (made here, untimed) spread over vLLM's Python files."""
    root = open_root("vllm", site)
    files = sorted(p.relative_to(site).as_posix() for p in (site / "vllm").rglob("*.py"))
    rnd = random.Random(11)
    rnd.shuffle(files)
    out: list[SourceAnchor] = []
    for rel in files:
        try:
            names = sorted(python_symbols((site / rel).read_text(encoding="utf-8")))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for name in rnd.sample(names, min(len(names), 5)):
            out.append(SourceAnchor.model_validate(make_anchor(root, f"{rel}:{name}")))
            if len(out) == n:
                return out
    return out


def bench_anchors(n: int, site: Path) -> None:
    anchors = collect_anchors(site, n)
    root = open_root("vllm", site)
    t0 = time.perf_counter()
    verifier = Verifier({"vllm": root})
    results = [verifier.verify(f"a{i}", a, site) for i, a in enumerate(anchors)]
    dt = time.perf_counter() - t0
    ok = sum(r.result == "verified" for r in results)
    files = len({a.path for a in anchors})
    print(f"anchors: {len(anchors)} source anchors ({files} files) in {dt:.3f} s = "
          f"{len(anchors) / dt:,.0f} anchors/s, {ok} verified (cold Verifier, site-packages)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--anchors", type=int, default=1_000)
    ap.add_argument("--e2e-rows", type=int, default=1_000,
                    help="rows for the end-to-end figure (YAML parsing dominates; 0 skips)")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    default_site = Path(sys.prefix) / "lib" / version / "site-packages"
    ap.add_argument("--site-packages", type=Path, default=default_site)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_rows(args.rows, args.e2e_rows, Path(tmp))
    if (args.site_packages / "vllm").is_dir():
        bench_anchors(args.anchors, args.site_packages)
    else:
        print(f"anchors: skipped, no vllm under {args.site_packages}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
