"""The word lists are defined once: every user reads the same vocabulary."""

from residentkv.lowering import bundles, descriptor
from residentkv.model import vocabulary as v
from residentkv.trace import gates


def test_every_requirement_is_reported_by_some_gate_and_nothing_else() -> None:
    reported = {r for ids in gates.REQUIREMENTS.values() for r in ids}
    assert reported == {r.value for r in v.Requirement}


def test_gate_word_lists_are_the_vocabulary() -> None:
    assert tuple(gates.REQUIREMENTS) == v.ALL_GATE_NAMES
    assert (*v.GATE_NAMES, v.GateName.CONFORMANCE.value) == v.ALL_GATE_NAMES
    assert gates.GATE_NAMES is v.GATE_NAMES
    assert gates.CONTROLS is v.CONTROLS
    assert descriptor.CLASSES is v.CLASSES
    assert bundles.OBLIGATIONS is v.OBLIGATIONS


def test_tuples_hold_plain_strings() -> None:
    # plain str, so YAML/JSON serializers never meet an enum member
    for words in (v.GATE_NAMES, v.ALL_GATE_NAMES, v.CONTROLS, v.CLASSES, v.OBLIGATIONS,
                  v.ANCHOR_KINDS, *gates.REQUIREMENTS.values()):
        assert all(type(w) is str for w in words)
