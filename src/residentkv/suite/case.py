"""A suite case: ``case.yaml`` (schema ``residentkv.suite-case/v1``) beside its evidence.

A case states what it tests, which obligations, the exact class of every descriptor row, the
exact set of finding codes, and the exact gate results of its traces. ``case.yaml`` is
validated by the same loader users get for descriptors: ruamel.yaml with locations, duplicate
keys refused, every schema error reported at ``case.yaml:line:col``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from residentkv.errors import UserInputError
from residentkv.findings import Finding
from residentkv.limits import read_bounded
from residentkv.lowering.sources import confined
from residentkv.lowering.yamlio import load_yaml, plain, validation_findings
from residentkv.model.vocabulary import GateName, ObligationName, RowClass

CASE_SCHEMA = "residentkv.suite-case/v1"

Outcome = Literal["pass", "fail"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TraceExpectation(_Frozen):
    """What the gates must say about one claim of one trace of the case."""

    path: str = Field(min_length=1)
    claim: str = Field(min_length=1)
    gates: dict[GateName, Outcome] = Field(min_length=1)
    missing: dict[GateName, list[str]] = Field(default_factory=dict)
    controls: list[str] | None = None

    @model_validator(mode="after")
    def _missing_only_for_listed_gates(self) -> TraceExpectation:
        extra = set(self.missing) - set(self.gates)
        if extra:
            raise ValueError(f"missing names gates not listed under gates: {sorted(extra)}")
        return self


class SuiteCase(_Frozen):
    """One case of the bad-lowering suite."""

    schema_: Literal["residentkv.suite-case/v1"] = Field(alias="schema")
    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    kind: Literal["negative", "positive"]
    covers: str = Field(min_length=1, description="the required suite item (docs/concepts.md) "
                        "or control this case is")
    obligations: list[ObligationName] = Field(min_length=1)
    descriptor: str | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    bundles: str | None = Field(default=None, description="a folder of the case's own bundles")
    trust: str | None = Field(default=None, description="a trust policy the case's "
                              "attested traces are checked against")
    classes: dict[str, RowClass] = Field(default_factory=dict)
    codes: list[str] = Field(default_factory=list)
    traces: list[TraceExpectation] = Field(default_factory=list)

    @model_validator(mode="after")
    def _has_evidence(self) -> SuiteCase:
        if self.descriptor is None and not self.traces:
            raise ValueError("a case needs a descriptor, traces, or both")
        if self.descriptor is None and (self.classes or self.sources or self.bundles):
            raise ValueError("classes, sources and bundles need a descriptor")
        if self.descriptor is not None and not self.classes and not self.codes:
            raise ValueError("a descriptor case must state the class of every row (or, for a "
                             "file that cannot be evaluated, the codes it must produce)")
        return self


class CaseError(UserInputError):
    """A case directory that cannot be evaluated (missing or invalid case.yaml)."""

    code = "S001"

    def __init__(self, message: str, findings: list[Finding], **where: Any) -> None:
        super().__init__(message, code="S001", **where)
        self.findings = findings


def load_case(folder: Path) -> SuiteCase:
    """Load and validate ``folder/case.yaml``; every problem is located and collected."""
    path = folder / "case.yaml"
    if confined(folder.resolve(), "case.yaml") is None:
        raise CaseError("S002: case.yaml resolves outside the case folder (a symlink out of "
                        "it is never followed)", [], path=str(path))
    if not path.is_file():
        raise CaseError("no case.yaml in the case folder", [], path=str(folder))
    try:
        text = read_bounded(path, "case.yaml").decode("utf-8")
    except UnicodeDecodeError as e:
        raise CaseError(f"case.yaml is not UTF-8 text: {e}", [], path=str(path)) from None
    root = load_yaml(text, str(path), code="S001")
    try:
        case = SuiteCase.model_validate(plain(root))
    except ValidationError as e:
        findings = validation_findings(e, root, str(path), default="S001")
        raise CaseError(f"invalid case.yaml ({len(findings)} problems)", findings,
                        path=str(path)) from None
    if case.id != folder.name:
        raise CaseError(f"case id {case.id!r} differs from its folder name {folder.name!r}", [],
                        path=str(path))
    return case


def case_json_schema() -> dict[str, Any]:
    """The published JSON Schema of case.yaml (``residentkv schema suite-case``)."""
    schema = SuiteCase.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = CASE_SCHEMA
    return schema
