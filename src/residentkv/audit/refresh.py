"""Refresh the witness traces shipped for the adapter rows: ``python -m residentkv.audit.refresh``.

Runs the vLLM witness (real vLLM, the adapter's own ``run_witness``) for the scenarios the
adapter rows cite and copies their traces, unedited, into the package's
``data/descriptors/runtimes/traces/witness/`` with a ``PROVENANCE.json``, and pins each
trace's sha256 in the adapter descriptor and lists it in the package's manifest of recorded
runs (``data/recorded.json``). Refuses to write
anything unless every run matched its expected gate results. A maintainer command; needs the
``[vllm]`` extra.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from residentkv.audit.job import ADAPTER_FILE, ADAPTER_SCENARIOS, save_witness_traces
from residentkv.lowering.trace_pins import pin_trace_digests
from residentkv.sources.roots import runtimes_dir
from residentkv.trust.manifest import entry_for, write_manifest

COMMAND = "python -m residentkv.audit.refresh"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__)
    parser.add_argument("--dest", type=Path, default=runtimes_dir(),
                        help="descriptor folder to write traces/witness/ into")
    args = parser.parse_args(argv)
    from residentkv.adapters.vllm.witness import format_table, run_witness, summarize

    with tempfile.TemporaryDirectory(prefix="residentkv-witness-") as work:
        runs = run_witness(ADAPTER_SCENARIOS, 1, Path(work))
        print(format_table(summarize(runs)))
        if not runs or not all(r.matched for r in runs):
            print("refusing to ship traces: not every witness run matched its expected gate "
                  "results",
                  file=sys.stderr)
            return 1
        provenance = save_witness_traces(runs, args.dest, command=COMMAND)
        pin_trace_digests(args.dest / ADAPTER_FILE)
        if args.dest.resolve() == runtimes_dir().resolve():  # the package's recorded runs
            folder = args.dest / "traces" / "witness"
            write_manifest([entry_for(folder / s["file"], "witness")
                            for s in provenance["scenarios"]], replace="witness")
    print(f"wrote {args.dest / 'traces' / 'witness'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
