"""Which fences the docs test runs, and how it compares what they show."""

from __future__ import annotations

from pathlib import Path

from docblocks import blocks, matches

PAGE = '''# A page

```sh
make thing   # a script
```

```console
$ residentkv one \\
    --flag
line 1
line 2
$ residentkv two
```

```text
$ residentkv three
out
```

```text
not a command: output shown as text
```

```
residentkv synopsis [--option]
```

```python
print("not a shell block")
```
'''


def test_fences_are_scripts_transcripts_or_nothing(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    found = blocks(page, tmp_path)
    assert [(b.kind, b.first, b.line) for b in found] == [
        ("script", "make thing   # a script", 3),
        ("transcript", "residentkv one \\", 7),
        ("transcript", "residentkv three", 15)]
    one, two = found[1].steps
    assert one.command == "residentkv one \\\n    --flag" and one.shown == ("line 1", "line 2")
    assert two.command == "residentkv two" and two.shown == ()


def test_shown_output_is_exact_but_for_trailing_spaces_and_elisions() -> None:
    out = "a   \nb\nc\nd\n"
    assert matches(["a", "b", "c", "d"], out)
    assert not matches(["a", "b", "c"], out)  # a line left out is not shown output
    assert not matches(["a", "c", "d"], out)
    assert matches(["a", "...", "d"], out)
    assert matches(["...", "c", "d"], out) and matches(["a", "…"], out)
    assert not matches(["...", "x"], out)
    assert matches(["...", "b", "...", "d", "..."], out)
    assert matches([], "") and not matches([], "x\n")
    assert matches(["a", "...", "lost at seq … of c-1"], "a\nb\nlost at seq 17 of c-1\n")
    assert not matches(["lost at seq … of c-1"], "lost at seq 17 of c-2\n")
