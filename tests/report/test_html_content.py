"""report.html without a browser: self-contained, escaped, notes and targets present."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "lowering"
RunCli = Callable[..., tuple[int, str, str]]


def test_check_html_escapes_curator_text(cli_run: RunCli, tmp_path: Path) -> None:
    dest = tmp_path / "lowering"
    shutil.copytree(DATA, dest)
    desc = dest / "six_classes.yaml"
    text = desc.read_text()
    hostile = "<script>alert(1)</script> & <img src=x>"
    old = "      claim_identity:            {status: satisfied, evidence: [t_obs]}"
    assert old in text
    desc.write_text(text.replace(old, "      claim_identity:            {status: satisfied, "
                                      f"evidence: [t_obs], note: \"{hostile}\"}}", 1))
    rc, page, err = cli_run("check", str(desc), f"--source=toyrt={dest / 'tree'}",
                            "--format", "html")
    assert rc in (0, 1), err
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x&gt;" in page


def test_check_html_is_self_contained(cli_run: RunCli) -> None:
    _, page, _ = cli_run("check", str(DATA / "six_classes.yaml"), "--format", "html")
    assert page.startswith("<!doctype html>")
    assert "default-src 'none'" in page
    # no URL outside the page, except the SVG namespace and doc anchors' quoted URLs (text)
    urls = set(re.findall(r'(?:src|href)="([^"#][^"]*)"', page))
    assert urls == set()
    assert page.count('<section class="row"') == 6


def test_witness_traces_are_found_for_live_and_shipped_audits(tmp_path: Path) -> None:
    from residentkv.report.audit_result import witness_trace_paths

    live = tmp_path / "witness" / "live"
    (live / "traces" / "witness").mkdir(parents=True)
    for name in ("b.jsonl", "a.jsonl"):
        (live / "traces" / "witness" / name).write_text("")
    found = witness_trace_paths({"mode": "live", "descriptor": str(live / "adapter.yaml")})
    assert [p.name for p in found] == ["a.jsonl", "b.jsonl"]
    shipped = witness_trace_paths({"mode": "shipped", "traces": [{"path": "x.jsonl"}]})
    assert shipped == [Path("x.jsonl")]
