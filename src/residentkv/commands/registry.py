"""The list of command groups beyond the core (lowering, simulator, adapters).

Kept in one place so that cli.py stays a fixed shell and every group is registered explicitly;
a group whose module fails to import is an internal error, never a silently missing command.
"""

from __future__ import annotations

import click


def extra_commands() -> list[click.Command]:
    """Command objects of the later layers, imported explicitly."""
    return []
