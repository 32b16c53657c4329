"""Hostile input to ``check`` and its source roots: never a crash (exit 101), never a hang,
every limit of docs/limits.md enforced with a located error."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from residentkv import limits
from residentkv.cli import cli, main
from residentkv.lowering import anchors, sources
from residentkv.lowering.anchors import Verifier
from residentkv.lowering.descriptor import SourceAnchor
from residentkv.lowering.sources import PathRefused, SourceError, open_root

DATA = Path(__file__).resolve().parents[1] / "data" / "lowering"

ROW = """schema: residentkv.descriptor/v1
rows:
  - id: {rid}
    runtime: {{name: rt}}
    mode: m
    mechanism: native
    lowers: offloadable
    asserts: substrate
    boundary: b
    obligations:
      claim_identity: {{status: absent, evidence: {ev}}}
      materialization_predicate: {{status: absent, evidence: [a1]}}
      ordered_lifecycle: {{status: absent, evidence: [a1]}}
      claim_scoped_outcomes: {{status: absent, evidence: [a1]}}
    anchors:
      a1: {{kind: doc, url: "https://example.invalid", quote: "some quoted text"}}
"""


def run(args: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, input=stdin)
    code = result.exit_code
    if isinstance(result.exception, Exception) and not isinstance(result.exception,
                                                                   SystemExit):
        code = 101
    return code, result.output


def exit_of(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out + out.err


# --- crashes -------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "schema: residentkv.descriptor/v1\nrows:\n  - id: \"a\x00b\"\n",
    "schema: residentkv.descriptor/v1\nrows:\n  - id: \"a\x07b\"\n",
    "schema: residentkv.descriptor/v1\nrows: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "schema: residentkv.descriptor/v1\nrows:\n" + "".join("  " * i + "- \n"
                                                          for i in range(1, 3000)),
    "schema: residentkv.descriptor/v1\nrows:\n" + "".join("  " * i + "- a:\n"
                                                          for i in range(1, 80)),
])
def test_unusable_yaml_is_a_located_error(tmp_path: Path, text: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(text)
    code, out = exit_of(["check", str(path)], capsys)
    assert code == 2 and "internal error" not in out
    assert f"{path}:" in out


def test_a_list_inside_an_evidence_list_is_a_finding(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(ROW.format(rid="r", ev="[[a1]]"))
    code, out = exit_of(["check", str(path)], capsys)
    assert code == 1 and "D004" in out and "internal error" not in out


@pytest.mark.parametrize("rid", ["\"[/x]\"", "\"[bold]c-9[/bold]\"", "\":warning:\""])
def test_markup_in_user_text_is_shown_verbatim(tmp_path: Path, rid: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "[red]d[x].yaml"
    path.write_text(ROW.format(rid=rid, ev="[a1]"))
    code, out = exit_of(["check", str(path)], capsys)
    assert code == 0, out
    assert rid.strip('"') in out  # displayed as written: never interpreted, never hidden


FORGED = "r\nrt/native: native_conformance (rule 1)\r\u2028\u0085\u202e"
ESCAPES = "\x1b]52;c;ZWNobyBQV05FRAo=\x07\x1b]0;all native\x07\x1b[2J"


def test_no_field_of_the_text_report_forges_a_line_or_reaches_the_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a row id with a newline and a fake row line, separators and a bidi override, and a
    # boundary of OSC 52 (clipboard), OSC 0 (title) and CSI sequences: every field prints as
    # one line of visible text, escaped, in the matrix, the reasons and the findings alike
    path = tmp_path / "d.yaml"
    text = ROW.format(rid=json.dumps(FORGED), ev="[a1]").replace(
        "boundary: b", f"boundary: {json.dumps(ESCAPES)}")
    path.write_text(text + "    expect: " + json.dumps("unknown_evidence\nforged") + "\n")
    code, out = exit_of(["check", str(path)], capsys)
    assert code == 1, out
    assert not any(line.startswith("rt/native: native_conformance") for line in
                   out.splitlines()), out
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\u202e]", out), out
    assert "\\x1b]52;c;" in out and "r\\nrt/native: native_conformance" in out


@pytest.mark.parametrize("fmt", ["text", "json", "md", "sarif"])
def test_lone_surrogates_are_printed_escaped(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(ROW.format(rid='"\\ud800"', ev="[a1]"))
    done = subprocess.run([sys.executable, "-m", "residentkv", "check", str(path),
                           "--format", fmt], capture_output=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    # the id is not valid Unicode text, so the row is invalid (exit 1): reported, not a crash
    assert done.returncode == 1, done.stderr
    assert b"internal error" not in done.stderr


def test_a_huge_python_expression_is_refused_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "src"
    (root / "toyrt").mkdir(parents=True)
    (root / "toyrt/big.py").write_text("X = " + "+".join(["1"] * 200_000) + "\n")
    anchor = SourceAnchor(kind="source", package="toyrt", path="toyrt/big.py", symbol="X",
                          sha256="0" * 64)
    r = Verifier({"toyrt": open_root("toyrt", root)}).verify("a", anchor, tmp_path)
    assert (r.result, r.code) == ("failed", "A007")


def test_a_symlink_loop_in_a_source_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "src"
    root.mkdir()
    os.symlink(root / "b", root / "a")
    os.symlink(root / "a", root / "b")
    anchor = SourceAnchor(kind="source", package="p", path="a/x.py", lines="1-1",
                          quote="quoted text")
    r = Verifier({"p": open_root("p", root)}).verify("a", anchor, tmp_path)
    assert (r.result, r.code) == ("failed", "A005")
    assert open_root("p", root).releases() == set()


def _zip(path: Path, members: dict[str, bytes], **kw: object) -> Path:
    with zipfile.ZipFile(path, "w", **kw) as zf:  # type: ignore[arg-type]
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_encrypted_member_is_refused(tmp_path: Path) -> None:
    whl = _zip(tmp_path / "p.whl", {"p/x.py": b"X = 1\n"})
    raw = bytearray(whl.read_bytes())
    # set the "encrypted" flag bit in the local and central headers
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = raw.find(sig)
        off = at + (6 if sig == b"PK\x03\x04" else 8)
        raw[off] |= 0x1
    whl.write_bytes(bytes(raw))
    with pytest.raises(PathRefused, match="encrypted"):
        open_root("p", whl).read("p/x.py")


def test_unsupported_compression_and_bad_crc_are_refused(tmp_path: Path) -> None:
    whl = _zip(tmp_path / "p.whl", {"p/x.py": b"X = 1\n" * 100, "p/y.py": b"Y = 2\n"})
    raw = bytearray(whl.read_bytes())
    central = raw.find(b"PK\x01\x02")
    raw[central + 10] = 99  # compression method 99: not supported
    raw[raw.find(b"PK\x03\x04") + 8] = 99
    second = raw.find(b"Y = 2")
    raw[second] ^= 0xFF  # corrupt the stored bytes of y.py: CRC mismatch
    whl.write_bytes(bytes(raw))
    root = open_root("p", whl)
    for member in ("p/x.py", "p/y.py"):
        with pytest.raises(PathRefused):
            root.read(member)


def test_member_size_and_ratio_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whl = _zip(tmp_path / "p.whl", {"p/zeros.py": b"0" * 2_000_000},
               compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(PathRefused, match="compression-ratio"):
        open_root("p", whl).read("p/zeros.py")
    monkeypatch.setattr(sources, "MAX_MEMBER_BYTES", 1000)
    small = _zip(tmp_path / "q.whl", {"p/x.py": os.urandom(2000)})
    with pytest.raises(PathRefused, match="limit"):
        open_root("p", small).read("p/x.py")


def test_member_count_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAX_ARCHIVE_MEMBERS", 3)
    whl = _zip(tmp_path / "p.whl", {f"p/{i}.py": b"" for i in range(5)})
    with pytest.raises(SourceError, match="more than 3"):
        open_root("p", whl)


def test_truncated_sdist_is_a_located_error(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for i in range(50):
            data = os.urandom(4000)
            info = tarfile.TarInfo(f"p-1/p/{i}.py")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    path = tmp_path / "p-1.tar.gz"
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(SourceError, match="truncated or corrupt"):
        open_root("p", path)


def test_a_zip_needing_an_unknown_format_version_is_a_located_error(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("p/a.py", "x = 1\n")
    data = bytearray(buf.getvalue())
    entry = data.find(b"PK\x01\x02")
    data[entry + 6: entry + 8] = (64).to_bytes(2, "little")  # "version needed": 6.4
    path = tmp_path / "p-1.whl"
    path.write_bytes(bytes(data))
    with pytest.raises(SourceError, match=r"zip file version 6\.4"):
        open_root("p", path)


def test_source_file_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAX_SOURCE_FILE_BYTES", 100)
    (tmp_path / "big.txt").write_text("x" * 200)
    with pytest.raises(PathRefused, match="larger than 100"):
        open_root("p", tmp_path).read("big.txt")


def test_descriptor_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(ROW.format(rid="r", ev="[a1]"))
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 100)
    monkeypatch.setattr(limits.read_input, "__defaults__", ("descriptor", 100))
    code, out = exit_of(["check", str(path)], capsys)
    assert code == 2 and "L003" in out


# --- hangs: special files are refused before they are opened ----------------------------------

@pytest.mark.parametrize("args", [
    ["check", "{fifo}"],
    ["check", "--source", "p={fifo}", "{desc}"],
    ["check", "/dev/zero"],
    ["check", "--source", "x=/dev/zero", "{desc}"],
])
def test_special_files_are_refused_up_front(tmp_path: Path, args: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    desc = tmp_path / "d.yaml"
    desc.write_text(ROW.format(rid="r", ev="[a1]"))
    code, out = exit_of([a.format(fifo=fifo, desc=desc) for a in args], capsys)
    assert code == 2 and "L004" in out


def test_a_trace_anchor_naming_a_fifo_fails_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "t.jsonl")
    from residentkv.lowering.descriptor import TraceAnchor

    anchor = TraceAnchor(kind="trace", path="t.jsonl", gate="observation", claim="c")
    r = Verifier().verify("t", anchor, tmp_path)
    assert (r.result, r.code) == ("failed", "T021")


def test_check_reads_standard_input() -> None:
    text = (DATA / "six_classes.yaml").read_bytes()
    code, out = run(["check", "-", "--source", f"toyrt={DATA / 'tree'}"], stdin=text)
    # traces are relative to the working directory for "-": they are missing here, but the
    # descriptor itself was read from standard input
    assert code in (0, 1) and "toy/retention/soft_priority" in out


# --- linear-time relocation -----------------------------------------------------------------

def test_quote_relocation_finds_the_moved_window(tmp_path: Path) -> None:
    body = [f"line {i} of filler text" for i in range(5000)]
    body[4000:4003] = ["the promise is", "kept only while", "the claim is accepted"]
    (tmp_path / "f.txt").write_text("\n".join(body) + "\n")
    anchor = SourceAnchor(kind="source", package="p", path="f.txt", lines="10-12",
                          quote="promise is kept only while the claim")
    r = Verifier({"p": open_root("p", tmp_path)}).verify("a", anchor, tmp_path)
    assert (r.result, r.lines) == ("verified", "4001-4003")


def test_hash_relocation_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anchors, "MAX_RELOCATE_LINES", 1000)
    (tmp_path / "f.txt").write_text("\n".join(f"line {i}" for i in range(20_000)) + "\n")
    anchor = SourceAnchor(kind="source", package="p", path="f.txt", lines="1-100",
                          sha256="0" * 64)
    r = Verifier({"p": open_root("p", tmp_path)}).verify("a", anchor, tmp_path)
    assert (r.result, r.code) == ("drifted", "A001")


# --- mapping keys: strings only, one spelling ----------------------------------------------------

def _anchors_block(block: str) -> str:
    return ROW.format(rid="r", ev="[a1]").replace(
        '      a1: {kind: doc, url: "https://example.invalid", quote: "some quoted text"}\n',
        block)


DOC_ANCHOR = '{kind: doc, url: "https://example.invalid", quote: "some quoted text"}'


@pytest.mark.parametrize(("block", "code", "line"), [
    (f"      a1: {DOC_ANCHOR}\n      1: {DOC_ANCHOR}\n", "D040", 17),
    (f"      a1: {DOC_ANCHOR}\n      \"1\": {DOC_ANCHOR}\n      1: {DOC_ANCHOR}\n", "D041", 18),
    (f"      a1: {DOC_ANCHOR}\n      1: {DOC_ANCHOR}\n      \"1\": {DOC_ANCHOR}\n", "D041", 17),
    (f"      a1: {DOC_ANCHOR}\n      true: {DOC_ANCHOR}\n", "D040", 17),
    (f"      a1: {DOC_ANCHOR}\n      null: {DOC_ANCHOR}\n", "D040", 17),
    (f"      a1: {DOC_ANCHOR}\n      1.5: {DOC_ANCHOR}\n", "D040", 17),
    (f"      a1: {DOC_ANCHOR}\n      ? [a, b]\n      : {DOC_ANCHOR}\n", "D040", 17),
])
@pytest.mark.parametrize("command", [["check"], ["anchors", "verify"]])
def test_a_non_string_key_is_a_located_error(tmp_path: Path, block: str, code: str, line: int,
                                             command: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(_anchors_block(block))
    got, out = exit_of([*command, str(path)], capsys)
    assert got == 2 and "internal error" not in out, out
    assert f"{path}:{line}:" in out and f": error[{code} " in out, out


def test_a_non_string_key_in_a_case_or_bundle_is_located(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    (bundles / "x.yaml").write_text("schema: residentkv.bundle/v1\n1: x\n")
    path = tmp_path / "d.yaml"
    path.write_text(ROW.format(rid="r", ev="[a1]"))
    got, out = exit_of(["check", str(path), "--bundles", str(bundles)], capsys)
    assert got == 2 and f"{bundles / 'x.yaml'}:2:1: error[D040 " in out, out


# --- Markdown output: row text is text, never markup ---------------------------------------------

HOSTILE_TEXT = [
    '<img src=x onerror=alert(1)>',
    '<!-- everything below is hidden',
    '[click here](https://evil.example/)',
    'https://evil.example/x and www.evil.example and a@evil.example',
    'a | b | c',
    '**bold** _em_ `code` ~~strike~~ # heading',
    'line one\nline two\u2028three\x0cfour\x85five',
]


@pytest.mark.parametrize("hostile", HOSTILE_TEXT)
def test_markdown_report_escapes_row_text(tmp_path: Path, hostile: str) -> None:
    from html import escape as html_escape

    from markdown_it import MarkdownIt

    from residentkv.report.markdown import md_text

    quoted = json.dumps(hostile)
    text = ROW.format(rid=quoted, ev="[a1]").replace("    mode: m\n", f"    mode: {quoted}\n")
    text = text.replace("    boundary: b\n", f"    boundary: {quoted}\n")
    path = tmp_path / "d.yaml"
    path.write_text(text)
    code, out = run(["check", str(path), "--format", "md"])
    assert code in (0, 1), out
    html = MarkdownIt("commonmark").enable("table").enable("strikethrough").render(out)
    # nothing the row wrote became markup: no HTML element, link or comment of its own
    assert "<img" not in html and "<!--" not in html and "<a " not in html
    # it renders as exactly the text written (no character consumed by markup), one line each
    flat = html_escape(" ".join(hostile.splitlines()), quote=True)
    assert html.count(flat) >= 3  # id in the table and heading, the boundary
    # GFM autolinks (a bare URL, www., an e-mail address) need their raw spelling
    assert not {"://evil", "www.evil", "a@evil"} & {s for s in ("://evil", "www.evil", "a@evil")
                                                    if s in out}
    # the table keeps its columns: every table row has exactly the header's cell count
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    cells = {len(re.split(r"(?<!\\)\|", line)) for line in rows}
    assert len(cells) == 1, rows
    # and the text is all there, on one line per place it appears
    assert md_text(hostile) in out


# --- tar: the decompressed stream is bounded like a zip member ------------------------------------

def _gzip_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], tail: bytes = b"") -> Path:
    import gzip

    raw = io.BytesIO()
    for info, data in members:
        raw.write(info.tobuf(format=tarfile.GNU_FORMAT))
        raw.write(data)
        raw.write(b"\0" * (-len(data) % 512))
    raw.write(tail)
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=9))
    return path


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    return info


def test_a_tar_expanding_past_the_ratio_limit_is_refused(tmp_path: Path) -> None:
    zeros = b"0" * (20 << 20)  # 20 MiB that gzip stores in about 20 kB: a ratio near 1,000
    path = _gzip_tar(tmp_path / "p-1.tar.gz", [(_info("p-1/p/x.py", 10), b"x = 1 # ok"),
                                               (_info("p-1/p/zeros.py", len(zeros)), zeros)])
    with pytest.raises(SourceError, match="compression-ratio limit") as info:
        open_root("p", path)
    assert info.value.code == "L003"


def test_a_tar_member_declaring_32_gib_is_never_decompressed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexing skips each member's data; the skip is refused before it is decompressed."""
    import gzip

    path = _gzip_tar(tmp_path / "p-1.tar.gz", [(_info("p-1/p/big.py", 32 << 30), b"")],
                     tail=b"\0" * (8 << 20))  # 8 MiB of real zeros behind the header
    limit = sources.MAX_COMPRESSION_RATIO * path.stat().st_size + 4096
    produced = [0]
    real_read = gzip.GzipFile.read

    def counting_read(self: gzip.GzipFile, size: int = -1) -> bytes:
        data = real_read(self, size)
        produced[0] += len(data)
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", counting_read)
    with pytest.raises(SourceError) as info:
        open_root("p", path)
    assert info.value.code == "L003" and produced[0] <= limit + (1 << 20)


def test_a_modest_sdist_is_still_read(tmp_path: Path) -> None:
    text = b"".join(b"def f%d():\n    return %d\n" % (i, i) for i in range(2000))
    path = _gzip_tar(tmp_path / "p-1.tar.gz", [(_info("p-1/p/x.py", len(text)), text)])
    assert open_root("p", path).read("p/x.py") == text


@pytest.mark.parametrize("hole", ["line", "sparse"])
def test_trace_check_memory_stays_bounded_past_the_line_limit(tmp_path: Path,
                                                              hole: str) -> None:
    # a 32 MiB line inside a trace whose gates still run, or a 32 MiB sparse file (no event
    # at all): the reader and the report's line lookup skip past the line limit to the next
    # newline without holding the line (T007, T008); measured with tracemalloc, not a clock
    import tracemalloc

    lines = (DATA / "traces" / "witness.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    with path.open("wb") as fh:
        if hole == "line":
            fh.writelines(lines[:3])
            for _ in range(32):
                fh.write(b"x" * (1 << 20))
            fh.write(b"\n")
            fh.writelines(lines[3:])
        else:
            fh.truncate(32 << 20)
    tracemalloc.start()
    try:
        code, out = run(["trace", "check", str(path), "--max-line-bytes", str(1 << 20)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code in (1, 2) and ("T007" in out or "T008" in out), out
    assert peak < 16 << 20, f"peak {peak / (1 << 20):.1f} MiB for a 32 MiB line"
