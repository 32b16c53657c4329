"""A fast decoder for ``residentkv.event/v1``, derived from the pydantic event models.

The pydantic models in :mod:`residentkv.model.events` stay the single source of truth (JSON
Schema, error reports, emitters). For reading large traces, each event model is mirrored as a
msgspec ``Struct`` with the same fields, types, defaults and constraints (nested models become
nested Structs, and a model's own after-validators run on the decoded Struct), decoded about
five times faster. The mirror is never more permissive: msgspec decodes strictly (no type
coercion), unknown fields are refused, and every ``ge``/``gt``/``min_length`` constraint is
carried over; a model whose rules cannot be carried over is left out of the mirror. Whatever
the mirror refuses goes to the pydantic validator, which either accepts it (pydantic's lax
JSON mode) or reports exactly what is wrong.

A decoded Struct answers the same attribute names as its pydantic twin, ``event`` included
(a class attribute), so the gates read either.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
import msgspec
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from residentkv.model.events import ALL_EVENT_TYPES


def _constraints(metadata: list[Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for m in metadata:
        # several bounds of one kind (a 64-bit type narrowed by a field): the tightest holds
        if isinstance(m, annotated_types.Ge):
            meta["ge"] = max(m.ge, meta.get("ge", m.ge))
        elif isinstance(m, annotated_types.Le):
            meta["le"] = min(m.le, meta.get("le", m.le))
        elif isinstance(m, annotated_types.Gt):
            meta["gt"] = m.gt
        elif isinstance(m, annotated_types.MinLen):
            meta["min_length"] = m.min_length
        else:
            raise TypeError(f"constraint {m!r} has no msgspec mirror")
    if "gt" in meta and "ge" in meta:
        # msgspec takes one lower bound: keep the tighter
        if meta["ge"] > meta["gt"]:
            del meta["gt"]
        else:
            del meta["ge"]
    return meta


def _with_meta(annotation: Any, meta: dict[str, Any]) -> Any:
    """Apply constraints to the non-null part of an optional type, as pydantic does."""
    if not meta:
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"constraints on {annotation!r} have no msgspec mirror")
        return _with_meta(inner[0], meta) | None
    if get_origin(annotation) is Annotated:
        # a constrained type (64-bit) narrowed by the field: one Meta with the tightest bounds
        base, *metas = get_args(annotation)
        bounds = [annotated_types.Ge(m.ge) for m in metas if m.ge is not None] + [
            annotated_types.Le(m.le) for m in metas if m.le is not None]
        meta = _constraints([*bounds, *(_as_annotated(k, v) for k, v in meta.items())])
        return Annotated[base, msgspec.Meta(**meta)]
    return Annotated[annotation, msgspec.Meta(**meta)]


def _as_annotated(key: str, value: Any) -> Any:
    kinds = {"ge": annotated_types.Ge, "le": annotated_types.Le, "gt": annotated_types.Gt,
             "min_length": annotated_types.MinLen}
    return kinds[key](value)


def _mirrorable(model: type[BaseModel]) -> bool:
    """Whether every rule of *model* (and of the models inside it) can be carried over."""
    decorators = model.__pydantic_decorators__
    if decorators.field_validators or decorators.root_validators or any(
            d.info.mode != "after" for d in decorators.model_validators.values()):
        return False
    for field in model.model_fields.values():
        for part in (field.annotation, *get_args(field.annotation)):
            if isinstance(part, type) and issubclass(part, BaseModel) and not _mirrorable(part):
                return False
    return True


def _field_type(annotation: Any) -> Any:
    """The msgspec type of a pydantic field annotation (nested models become Structs, and
    constrained types inside unions and lists carry their constraints as msgspec metadata)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _mirror(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return Annotated[_field_type(args[0]), msgspec.Meta(**_constraints(list(args[1:])))]
    if origin in (Union, types.UnionType):
        return Union[tuple(_field_type(a) for a in args)]  # noqa: UP007
    if origin is list:
        return list[_field_type(args[0])]  # type: ignore[misc]
    return annotation


def _post_init(model: type[BaseModel]) -> Any:
    """Run the model's own after-validators on the decoded Struct (same attribute names)."""
    checks = [d.func for d in model.__pydantic_decorators__.model_validators.values()]
    if not checks:
        return None

    def __post_init__(self: Any) -> None:
        for check in checks:
            check(self)  # a ValueError becomes a msgspec.ValidationError

    return __post_init__


_MIRRORS: dict[type[BaseModel], type[msgspec.Struct]] = {}


def _mirror(model: type[BaseModel]) -> type[msgspec.Struct]:
    """The Struct twin of *model*: same fields, types, defaults, constraints and validators."""
    if model in _MIRRORS:
        return _MIRRORS[model]
    event = model.model_fields.get("event")
    name = str(event.annotation.__args__[0]) if event else None  # type: ignore[union-attr]
    fields: list[Any] = []
    for attr, field in model.model_fields.items():
        if attr == "event":
            continue  # the tag
        key = field.alias or attr
        annotation = _with_meta(_field_type(field.annotation),
                                _constraints(list(field.metadata)))
        if field.default_factory is not None:
            factory: Any = field.default_factory  # every default factory here takes no argument
            fields.append((key, annotation, msgspec.field(default_factory=factory)))
        elif field.default is not PydanticUndefined:
            fields.append((key, annotation, field.default))
        else:
            fields.append((key, annotation))
    post = _post_init(model)
    tagging: dict[str, Any] = {"tag_field": "event", "tag": name} if name else {}
    # omit_defaults: a re-encoded event names only the keys its line must have held, which
    # is what the duplicate-key check counts (residentkv.trace.duplicate_keys); gc=False: an
    # event holds only scalars, lists of scalars and nested events, so it is never in a cycle
    # and the collector need not track it
    struct = msgspec.defstruct(
        model.__name__, fields, kw_only=True, forbid_unknown_fields=True, frozen=True,
        omit_defaults=True, gc=False, namespace={"__post_init__": post} if post else None,
        **tagging,
    )
    if name:
        struct.event = name  # type: ignore[attr-defined]  # read like the pydantic field
    _MIRRORS[model] = struct
    return struct


#: event name -> fast Struct, for every event model that can be mirrored exactly
FAST_STRUCTS: dict[str, type[msgspec.Struct]] = {
    s.event: s  # type: ignore[attr-defined]
    for s in (_mirror(m) for m in ALL_EVENT_TYPES if _mirrorable(m))
}

FAST_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    Union[tuple(FAST_STRUCTS.values())]  # noqa: UP007
)

DecodeError = (msgspec.ValidationError, msgspec.DecodeError)
