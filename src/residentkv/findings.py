"""Findings: located, coded problems in user data, collected rather than raised."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from residentkv.codes import lookup


class Finding(BaseModel):
    """One problem found in user data, with its location and stable code."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    message: str
    path: str | None = None
    line: int | None = None
    col: int | None = None
    severity: str = "error"
    notes: tuple[str, ...] = ()
    help: str | None = None

    @property
    def name(self) -> str:
        return lookup(self.code).name

    @property
    def location(self) -> str:
        parts = [p for p in (self.path, self.line, self.col) if p is not None]
        return ":".join(str(p) for p in parts)

    def render(self) -> str:
        """``path:line:col: error[CODE name]: message`` plus note/help lines."""
        head = f"{self.severity}[{self.code} {self.name}]: {self.message}"
        lines = [f"{self.location}: {head}" if self.location else head]
        lines += [f"  note: {n}" for n in self.notes]
        if self.help:
            lines.append(f"  help: {self.help}")
        return "\n".join(lines)
