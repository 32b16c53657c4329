"""Findings: located, coded problems in user data, collected rather than raised."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from residentkv.codes import lookup


def location(path: str | None, line: int | None, col: int | None) -> str:
    """``path:line:col`` with the parts that are known."""
    return ":".join(str(p) for p in (path, line, col) if p is not None)


def render_line(code: str, name: str, message: str, *, path: str | None = None,
                line: int | None = None, col: int | None = None,
                severity: str = "error") -> str:
    """``path:line:col: severity[CODE name]: message``: one located problem, the form every
    report prints."""
    head = f"{severity}[{code} {name}]: {message}"
    where = location(path, line, col)
    return f"{where}: {head}" if where else head


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
        return location(self.path, self.line, self.col)

    def render(self) -> str:
        """``path:line:col: error[CODE name]: message`` plus note/help lines."""
        lines = [render_line(self.code, self.name, self.message, path=self.path,
                             line=self.line, col=self.col, severity=self.severity)]
        lines += [f"  note: {n}" for n in self.notes]
        if self.help:
            lines.append(f"  help: {self.help}")
        return "\n".join(lines)
