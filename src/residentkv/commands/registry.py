"""The list of command groups beyond the core (lowering, simulator, adapters).

Kept in one place so that cli.py stays a fixed shell and every group is registered explicitly;
a group whose module fails to import is an internal error, never a silently missing command.
Modules imported here must not import torch or vLLM at import time.
"""

from __future__ import annotations

import click


def extra_commands() -> list[click.Command]:
    """Command objects of the later layers, imported explicitly."""
    from residentkv.commands.anchors import anchors
    from residentkv.commands.attest import attest
    from residentkv.commands.audit import audit
    from residentkv.commands.bundles import bundles
    from residentkv.commands.chaos import chaos
    from residentkv.commands.check import check
    from residentkv.commands.fleet import fleet
    from residentkv.commands.microruntime import litmus, sweep
    from residentkv.commands.observe import observe_command
    from residentkv.commands.sources import drift, sources
    from residentkv.commands.suite import suite
    from residentkv.commands.witness import witness

    anchors.add_command(drift)
    return [attest, audit, bundles, check, anchors, sources, litmus, sweep, suite, witness,
            fleet, observe_command, chaos]
