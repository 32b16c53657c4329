"""EventRecord, the static type the gates read events by, names exactly the v1 fields."""

from __future__ import annotations

import typing

import msgspec

from residentkv.model.event_record import EventRecord, claim_names, required_label
from residentkv.model.events import ALL_EVENT_TYPES, ClaimRestoreRequired
from residentkv.model.fast_events import FAST_STRUCTS


def _protocol_attributes() -> set[str]:
    return {n for n, v in vars(EventRecord).items() if isinstance(v, property)}


def _model_attributes() -> set[str]:
    # the envelope's schema is read as schema_ (pydantic) / schema (msgspec): the gates never
    # read it
    return {n for m in ALL_EVENT_TYPES for n in m.model_fields} - {"schema_"}


def test_every_attribute_is_a_v1_field_and_every_field_an_attribute() -> None:
    assert _protocol_attributes() == _model_attributes()


def test_the_fast_twins_answer_the_same_names() -> None:
    twins = {f.name for s in FAST_STRUCTS.values() for f in msgspec.structs.fields(s)}
    twins |= {"event"}  # the tag: a class attribute of each twin
    assert _protocol_attributes() <= twins | {"schema"}
    assert _protocol_attributes() == twins - {"schema"}


def test_each_attribute_type_admits_what_the_models_declare() -> None:
    """A field typed optional in some model is optional in the protocol (it is read across
    event types); one required everywhere is not widened to optional."""
    hints = {n: typing.get_type_hints(getattr(EventRecord, n).fget)["return"]
             for n in _protocol_attributes()}
    for model in ALL_EVENT_TYPES:
        for name, field in model.model_fields.items():
            if name == "schema_":
                continue
            optional = type(None) in typing.get_args(field.annotation)
            if optional:
                assert type(None) in typing.get_args(hints[name]), (model.__name__, name)


def test_helpers() -> None:
    assert claim_names("c-1", None, "c-2", "c-1") == {"c-1", "c-2"}
    e = ClaimRestoreRequired.model_validate({
        "schema": "residentkv.event/v1", "seq": 3, "ts_ns": 1, "source": "t",
        "event": "claim_restore_required", "claim_id": "c", "request_id": "r",
        "object_id": "o", "cache_identity": "i", "request_token_map_id": "m",
        "predicate_id": "p", "generation": 7, "from_tier": "host", "to_tier": "device",
        "tokens": 1})
    assert required_label(e) == 7
