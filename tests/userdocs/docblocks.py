"""The console blocks of a Markdown page: which fences are commands, and what they show.

A fence opens with three backticks and an info string at the start of a line and closes with
three backticks alone. Of those:

- ```` ```sh ````, ```` ```bash ````, ```` ```shell ```` hold a **script**: every line is shell
  input, run as pasted, as one ``bash`` script; it must end with exit status 0 and bash must not
  complain about any line (a missing command or file, bad syntax); no output is shown;
- ```` ```console ```` and ```` ```shell-session ````, and ```` ```text ```` or an unlabelled fence
  whose first non-blank line starts with ``$ ``, hold a **transcript**: a line starting with
  ``$ `` is a command (a line ending in ``\\`` continues it), the lines after it until the next
  command are the output it shows;
- every other fence (``python``, ``yaml``, output or a synopsis without ``$ ``) holds no command.

A transcript's shown output must be the command's output (standard output and error, as a
terminal shows them), line for line, trailing spaces ignored; a line ``...`` stands for any
number of lines, and ``…`` inside a line for any text (a figure that differs from run to run).
A transcript command that shows no output must exit 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SCRIPT_LANGS = frozenset({"sh", "bash", "shell"})
TRANSCRIPT_LANGS = frozenset({"console", "shell-session"})
#: fences that are transcripts only when they start with a ``$ `` line
MAYBE_TRANSCRIPT_LANGS = frozenset({"text", ""})
PROMPT = "$ "
ELISION = frozenset({"...", "…"})
#: inside a shown line: any text
INLINE = "…"
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Step:
    """One command of a block and the output the page shows for it (transcripts only)."""

    command: str
    shown: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    """A fence of a page that holds commands."""

    page: str
    line: int
    lang: str
    kind: str  # "script" or "transcript"
    text: str
    steps: tuple[Step, ...]

    @property
    def first(self) -> str:
        """The block's first command line: how the skip list and the page setups name it."""
        return self.steps[0].command.splitlines()[0]

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _transcript(text: str) -> tuple[Step, ...]:
    steps: list[Step] = []
    command: list[str] | None = None
    shown: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(PROMPT):
            if command is not None:
                steps.append(Step("\n".join(command), tuple(shown)))
            command, shown = [line[len(PROMPT):]], []
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
        elif command is not None:
            shown.append(line)
        i += 1
    if command is not None:
        steps.append(Step("\n".join(command), tuple(shown)))
    return tuple(steps)


def _starts_with_prompt(text: str) -> bool:
    first = next((line for line in text.splitlines() if line.strip()), "")
    return first.startswith(PROMPT)


def blocks(path: Path, root: Path) -> list[Block]:
    """Every command block of the page at *path* (named relative to *root*), in page order."""
    text = path.read_text(encoding="utf-8")
    page = path.relative_to(root).as_posix()
    out = []
    for m in _FENCE.finditer(text):
        lang, body = m.group(1).lower(), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if lang in SCRIPT_LANGS and not _starts_with_prompt(body):
            out.append(Block(page, line, lang, "script", body, (Step(body.rstrip("\n")),)))
        elif lang in TRANSCRIPT_LANGS or lang in SCRIPT_LANGS or (
                lang in MAYBE_TRANSCRIPT_LANGS and _starts_with_prompt(body)):
            steps = _transcript(body)
            if not steps:
                raise ValueError(f"{page}:{line}: a {lang} block without a '$ ' command")
            out.append(Block(page, line, lang, "transcript", body, steps))
    return out


def matches(shown: tuple[str, ...] | list[str], output: str) -> bool:
    """Whether *output* is what *shown* shows: line for line, trailing spaces ignored, each
    ``...`` line standing for any number of lines."""
    got = [line.rstrip() for line in output.splitlines()]
    want = [line.rstrip() for line in shown]
    return _match(want, got)


def _same(shown: str, line: str) -> bool:
    if INLINE not in shown:
        return shown == line
    return re.fullmatch(".*".join(map(re.escape, shown.split(INLINE))), line) is not None


def _match(want: list[str], got: list[str]) -> bool:
    """Wildcard matching over lines (an elision is ``*``), with the usual backtracking to the
    last elision."""
    w = g = 0
    star, resume = -1, 0
    while g < len(got):
        if w < len(want) and want[w] in ELISION:
            star, resume = w, g
            w += 1
        elif w < len(want) and _same(want[w], got[g]):
            w += 1
            g += 1
        elif star >= 0:
            resume += 1
            w, g = star + 1, resume
        else:
            return False
    return all(x in ELISION for x in want[w:])
