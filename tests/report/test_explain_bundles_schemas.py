"""explain (codes, names, requirement ids, controls, gates, modes, --list), bundles list/show,
and the $id of every published schema."""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import pytest

from residentkv.codes import CODES
from residentkv.commands.schema import SCHEMAS, schema_id
from residentkv.lowering.bundles import load_bundles
from residentkv.model.automaton import VIOLATION_WHY, Violation
from residentkv.model.vocabulary import CONTROLS, GATE_NAMES, GateName, Requirement
from residentkv.trace.gates import REQUIREMENTS
from residentkv.trace.registry import GATES

RunCli = Callable[..., tuple[int, str, str]]


@pytest.mark.parametrize("term", ["D006", "d006", "unknown_anchor"])
def test_explain_a_code_by_id_or_name(cli_run: RunCli, term: str) -> None:
    rc, out, _ = cli_run("explain", term)
    assert rc == 0 and out.startswith("D006 unknown_anchor")


def test_explain_knows_every_name_it_prints(cli_run: RunCli) -> None:
    for code in CODES.values():
        assert cli_run("explain", code.name)[0] == 0, code.name


@pytest.mark.parametrize("req", [r.value for r in Requirement])
def test_explain_every_requirement_id(cli_run: RunCli, req: str) -> None:
    rc, out, _ = cli_run("explain", req)
    assert rc == 0 and "(trace requirement id)" in out
    gates = [g for g in GATE_NAMES if req in REQUIREMENTS[g]]
    assert f"reported by gates: {', '.join(gates)}" in out


@pytest.mark.parametrize("violation", list(Violation), ids=str)
def test_explain_every_automaton_violation(cli_run: RunCli, violation: Violation) -> None:
    """Every violation an illegal step can name (``illegal.violation``) is explainable."""
    rc, out, _ = cli_run("explain", violation.value)
    assert rc == 0, violation
    assert f"{violation.value} (automaton violation" in out
    assert VIOLATION_WHY[violation] in out


def test_every_gate_requirement_is_a_requirement_with_a_reason() -> None:
    """The gate registry names only Requirement members, each with its why-text, and every
    Requirement is asked by some gate (so explain's list and the gates' agree)."""
    asked = {r for g in GATES.values() for r in g.requirements}
    assert asked == set(Requirement)
    for g in GATES.values():
        assert set(g.why) == set(g.requirements)
        assert all(text.strip() for text in g.why.values())
        assert set(g.unconditional) <= set(g.requirements)
    assert list(GATES) == list(GateName)


def test_explain_requirement_names_the_bundles_that_need_it(cli_run: RunCli) -> None:
    _, out, _ = cli_run("explain", "refusal_attributed")
    need = sorted(m for m, b in load_bundles().items()
                  for ob in b.obligations.values() if "refusal_attributed" in ob.requirements)
    assert need and all(m in out for m in need)


@pytest.mark.parametrize("term", [*CONTROLS, *GATE_NAMES, *sorted(load_bundles())])
def test_explain_controls_gates_and_modes(cli_run: RunCli, term: str) -> None:
    rc, out, _ = cli_run("explain", term)
    assert rc == 0 and out.startswith(term)


def test_explain_list_names_everything(cli_run: RunCli) -> None:
    rc, out, _ = cli_run("explain", "--list")
    assert rc == 0
    for term in [*CODES, *(c.name for c in CODES.values()), *(r.value for r in Requirement),
                 *CONTROLS, *GATE_NAMES, *(v.value for v in Violation)]:
        assert term in out


def test_explain_unknown_term_suggests(cli_run: RunCli) -> None:
    rc, _, err = cli_run("explain", "unknwn_anchor")
    assert rc == 2 and "did you mean unknown_anchor" in err and "Traceback" not in err
    rc, _, err = cli_run("explain")
    assert rc == 2 and "--list" in err


def test_bundles_list(cli_run: RunCli) -> None:
    rc, out, _ = cli_run("bundles", "list", "--format", "json")
    assert rc == 0
    assert sorted(b["mode"] for b in json.loads(out)) == sorted(load_bundles())
    rc, out, _ = cli_run("bundles", "list")
    assert rc == 0 and all(m in out for m in load_bundles())


def test_bundles_show_says_which_gates_satisfy_b3(cli_run: RunCli) -> None:
    bundle = load_bundles()["hard_protected"]
    rc, out, _ = cli_run("bundles", "show", "hard_protected")
    assert rc == 0
    b3 = out.split("B3 ordered_lifecycle")[1].split("B4 ")[0]
    for alt in bundle.obligations["ordered_lifecycle"].satisfied_by:
        for gate in alt:
            assert (f"gate {gate} passes" if gate != "source" else "verified source") in b3
    rc, out, _ = cli_run("bundles", "show", "hard_protected", "--format", "json")
    assert json.loads(out)["obligations"]["ordered_lifecycle"]["satisfied_by"] == \
        bundle.obligations["ordered_lifecycle"].satisfied_by


def test_bundles_show_unknown_mode(cli_run: RunCli) -> None:
    rc, _, err = cli_run("bundles", "show", "pinned")
    assert rc == 2 and "no bundle for mode 'pinned'" in err and "hard_protected" in err


def test_every_published_schema_has_its_documented_id(cli_run: RunCli) -> None:
    import residentkv.commands.check
    import residentkv.commands.suite  # noqa: F401  (register their schemas)

    rc, listing, _ = cli_run("schema", "--list")
    assert rc == 0
    assert {"event", "claim", "descriptor", "bundle", "suite-case"} <= set(SCHEMAS)
    for name in SCHEMAS:
        rc, out, _ = cli_run("schema", name)
        schema = json.loads(out)
        assert schema["$id"] == schema_id(name) == f"https://residentkv.dev/schema/{name}-v1.json"
        assert schema_id(name) in listing
        jsonschema.Draft202012Validator.check_schema(schema)
