"""``residentkv schema {event,claim,...}``: print a published JSON Schema.

Every published schema carries ``$id`` ``https://residentkv.dev/schema/NAME-v1.json`` (the URL
documented in the README; editors map it to the output of this command) and ``$schema``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from residentkv.jsontext import json_text
from residentkv.model.claim import ResidentClaim
from residentkv.model.events import event_json_schema

SCHEMA_BASE = "https://residentkv.dev/schema/"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_id(name: str) -> str:
    """The documented ``$id`` of published schema *name*."""
    return f"{SCHEMA_BASE}{name}-v1.json"


def _claim_schema() -> dict[str, Any]:
    schema = ResidentClaim.model_json_schema()
    schema["title"] = "residentkv.claim/v1"
    return schema


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "event": event_json_schema,
    "claim": _claim_schema,
}


def register_schema(name: str, factory: Callable[[], dict[str, Any]]) -> None:
    """Let a later layer publish its schema under ``residentkv schema NAME``."""
    SCHEMAS[name] = factory


def published_schema(name: str) -> dict[str, Any]:
    """Schema *name* as published: its own keys plus the dialect and the documented ``$id``."""
    schema = SCHEMAS[name]()
    schema["$schema"] = DIALECT
    schema["$id"] = schema_id(name)
    return schema


class _SchemaName(click.ParamType):  # type: ignore[type-arg]
    name = "schema"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value not in SCHEMAS:
            self.fail(f"'{value}' is not one of: {', '.join(sorted(SCHEMAS))}", param, ctx)
        return str(value)


@click.command()
@click.argument("name", type=_SchemaName(), required=False)
@click.option("--list", "list_", is_flag=True, help="List the published schemas and their $id.")
def schema(name: str | None, list_: bool) -> None:
    """Print the JSON Schema NAME (event, claim, descriptor, bundle, suite-case, ...)."""
    if list_ or name is None:
        for n in sorted(SCHEMAS):
            click.echo(f"{n:<12} {schema_id(n)}")
        return
    click.echo(json_text(published_schema(name)), nl=False)
