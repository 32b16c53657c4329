"""``residentkv schema {event,claim,...}``: print a published JSON Schema."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from residentkv.model.claim import ResidentClaim
from residentkv.model.events import event_json_schema


def _claim_schema() -> dict[str, Any]:
    schema = ResidentClaim.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "residentkv.claim/v1"
    return schema


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "event": event_json_schema,
    "claim": _claim_schema,
}


def register_schema(name: str, factory: Callable[[], dict[str, Any]]) -> None:
    """Let a later layer publish its schema under ``residentkv schema NAME``."""
    SCHEMAS[name] = factory


class _SchemaName(click.ParamType):  # type: ignore[type-arg]
    name = "schema"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value not in SCHEMAS:
            self.fail(f"{value!r} is not one of: {', '.join(sorted(SCHEMAS))}", param, ctx)
        return str(value)


@click.command()
@click.argument("name", type=_SchemaName())
def schema(name: str) -> None:
    """Print the JSON Schema NAME (event, claim, ...)."""
    click.echo(json.dumps(SCHEMAS[name](), indent=2, sort_keys=True))
