"""Every console block of README.md and docs/*.md runs as pasted, and shows what it prints.

Which fences are commands, and how shown output is compared: :mod:`docblocks`. How a command
runs (bash, a fresh shell's environment, servers in the background): :mod:`docrunner`. Each
page runs top to bottom in its own scratch folder, prepared by the page's marked setup in
:data:`PAGES` — by default only links to the clone's ``src/`` and ``docs/``, so that paths
written from a clone's root resolve while everything a command writes lands in the scratch
folder; a page that starts vLLM gets a free port in place of the 8000 it shows, and its one
server serves every block of the page. Blocks not run are in :data:`SKIPPED`, the one list,
each with its reason. After a page, its ``after`` check (if any) looks at what the reader would
have seen (the newcomer tests of the serving and CI recipes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from docblocks import Block, blocks
from docrunner import Scratch, run_block, run_command, scratch, wait_http

from residentkv.adapters.vllm.engine import free_port
from residentkv.trace.gates import check_trace
from residentkv.trace.verdict_words import first_cause

ROOT = Path(__file__).resolve().parents[2]
PAGE_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE_CLIENT = ROOT / "docs" / "examples" / "claim_client.py"
SERVING_PAGE = "docs/vllm-adapter.md"
CONCEPTS_PAGE = "docs/concepts.md"

#: (page, the block's first command line) -> why the docs test does not run it
SKIPPED: dict[tuple[str, str], str] = {
    ("README.md", "make demo    # the main job: audit every curated runtime mapping, with the "
                  "live vLLM witness"):
        "make demo builds .venv and runs the whole audit with the live witness (minutes; its "
        "parts are tested one by one), make test is this suite",
    ("README.md", "export VLLM_CPU_KVCACHE_SPACE=1"):
        f"the serving recipe of {SERVING_PAGE}, which runs there (asserted identical: "
        "test_readme_serves_as_the_serving_page)",
    (CONCEPTS_PAGE, "python3 -m venv .venv && . .venv/bin/activate"):
        "installs into a new environment (minutes, network); the suite runs in the one the "
        "Makefile built with the same commands (test_install_from_a_clone_is_the_makefile_s)",
    ("docs/fleet.md", "make fleet            # creates .venv-fleet on first use (≈ 90 s from "
                      "a warm pip cache)"):
        "needs root for a private network namespace and builds its own .venv-fleet with "
        "Dynamo; not part of make test (its pure parts: tests/fleet_harness)",
    ("docs/fleet.md", "python -m dynamo.frontend --router-mode kv --http-host 127.0.0.1 "
                      "--http-port 8000 \\"):
        "what make fleet runs inside its network namespace and .venv-fleet (Dynamo is not "
        "installed in the test environment)",
    ("docs/observe.md", "curl -s http://127.0.0.1:8000/tokenize -H 'content-type: "
                        "application/json' \\"):
        "asks a real model's server for token ids (MODEL: its name); the tiny model has no "
        "tokenizer, and the page's run names its prompts as token ids",
    ("docs/observe.md", "residentkv observe --kv-events ipc:///run/vllm/kv-events.sock --topic "
                        "kv \\"):
        "the command with every option, at a deployment's paths (/run/vllm, claims.yaml, "
        "port 9464); the page's 'Try it' block runs the observer on a live server (with "
        "--server), and tests/observe runs these options",
    ("docs/chaos.md", "make chaos                                   # a few minutes, every "
                      "nemesis, twice each"):
        "make chaos and a default chaos run take minutes under load with every nemesis; make "
        "test runs a short derandomized run with a kill and a restart "
        "(tests/adapters/chaos/test_chaos_vllm.py), and chaos check re-judges it",
    ("docs/chaos.md", "residentkv chaos run --url http://127.0.0.1:8000 --control-socket "
                      "/run/residentkv/engine.sock \\"):
        "attaches to the reader's own deployment (a server at 8000 with its control socket at "
        "/run/residentkv) for 300 s; not run against an attached server here: the harness "
        "on its own server is tests/adapters/chaos/test_chaos_vllm.py, the --url/--control-"
        "socket checks tests/adapters/chaos/test_chaos_cli.py",
    (SERVING_PAGE, "make witness-tp      # --shape tp2 --scenario all (make test runs three "
                   "scenarios at TP=2)"):
        "every witness scenario at tensor parallelism 2 (about ten minutes); make test runs "
        "three of them (tests/adapters/test_vllm_tp2.py)",
}


@dataclass(frozen=True)
class Page:
    """A page's marked setup: what its scratch folder holds before the first block."""

    vllm: bool = False
    #: prepares the folder; returns Scratch options (subs, ready)
    setup: Callable[[Path], dict[str, Any]] | None = None
    #: checks what the reader saw, after the page's last block
    after: Callable[[Scratch, list[str]], None] | None = None
    #: the pinned runtime releases in the cache (``residentkv sources fetch``)
    releases: bool = False


def _vllm_server(folder: Path) -> dict[str, Any]:
    """A free port where the page shows 8000; ready when vLLM answers /health."""
    port = str(free_port())
    return {"subs": {"8000": port}, "ready": wait_http(f"http://127.0.0.1:{port}/health")}


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _served_a_restore_and_a_refusal(s: Scratch, outputs: list[str]) -> None:
    """The newcomer of the serving page: a real restore from the host tier, and a refusal the
    official client saw as HTTP 409, sent once (not retried)."""
    client = next(o for o in outputs if o.startswith("register:"))
    assert "reuse: restored" in client and "reuse: HTTP 409 refused" in client, client
    events = _events(s.folder / "trace.jsonl")
    restored = [e for e in events if e["event"] == "claim_restored"]
    assert [(e["claim_id"], e["source"], e["content_verified"]) for e in restored] == [
        ("c-1", "offload_tier", True)]
    refused = [e for e in events if e["event"] == "active_request_refused"]
    assert [e["outcome_claim_id"] for e in refused] == ["c-1"]
    started = [e["request_id"] for e in events if e["event"] == "request_started"]
    assert started.count(refused[0]["request_id"]) == 1  # the 409 was not retried


def _signed_verdict_accepted(s: Scratch, outputs: list[str]) -> None:
    """The newcomer of the CI recipe: a verdict signed by the policy's key that `attest
    verify` accepts (its shown output checked it) -- and refuses once a descriptor it names
    has changed."""
    assert any(o.startswith("ok   verdict.intoto.json") and "PASSED" in o for o in outputs)
    with (s.folder / "descriptors" / "vllm-0.32.0.yaml").open("a", encoding="utf-8") as fh:
        fh.write("# edited after signing\n")
    code, out = run_command(
        "residentkv attest verify verdict.intoto.json --trust policy.yaml --resource-uri "
        '"residentkv:check:descriptors/tensorrt-llm.yaml,descriptors/vllm-0.32.0.yaml"', s)
    assert code == 1 and "descriptors/vllm-0.32.0.yaml" in out, out


def _saw_a_claim_lost(s: Scratch, outputs: list[str]) -> None:
    """The newcomer of the observe page: the observer's trace shows a claim lost with no outcome
    (a needed block removed after it materialized), and the gates say so in those words."""
    check = check_trace(s.folder / "observed.jsonl", ["lifecycle"])
    lost = {c: story.lost for c, story in check.stories.items() if story.lost is not None}
    assert lost, [r.model_dump(mode="json") for r in check.results]
    words = [first_cause(r.model_dump(mode="json"), check.stories.get(r.claim_id))
             for r in check.results if r.claim_id in lost]
    assert all("lost a needed block" in w for w in words), words


#: every page with a block that runs, and its marked setup
PAGES: dict[str, Page] = {
    "README.md": Page(),
    "docs/fleet-view.md": Page(),
    "docs/lowering.md": Page(after=_signed_verdict_accepted),
    "docs/observe.md": Page(vllm=True, setup=_vllm_server, after=_saw_a_claim_lost),
    "docs/runtimes.md": Page(releases=True),
    SERVING_PAGE: Page(vllm=True, setup=_vllm_server, after=_served_a_restore_and_a_refusal),
}


def _all_blocks() -> dict[str, list[Block]]:
    found = {}
    for path in PAGE_FILES:
        page_blocks = blocks(path, ROOT)
        if page_blocks:
            found[page_blocks[0].page] = page_blocks
    return found


BLOCKS = _all_blocks()


def _run(page: str) -> list[Block]:
    return [b for b in BLOCKS[page] if (page, b.first) not in SKIPPED]


def _page_params() -> list[Any]:
    return [pytest.param(p, marks=[pytest.mark.vllm] if PAGES[p].vllm else [], id=p)
            for p in sorted(PAGES)]


@pytest.mark.parametrize("page", _page_params())
def test_page_runs_as_pasted(page: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    spec = PAGES[page]
    if spec.releases:
        request.getfixturevalue("pinned_cache")  # skips (or fails in CI) when not fetched
    if spec.vllm:
        pytest.importorskip("vllm")
        pytest.importorskip("openai")
    folder = tmp_path / "scratch"
    folder.mkdir()
    for name in ("src", "docs"):  # a clone's root, read only: writes land in the scratch
        (folder / name).symlink_to(ROOT / name)
    options = spec.setup(folder) if spec.setup else {}
    outputs: list[str] = []
    with scratch(folder, **options) as s:
        for block in _run(page):
            outputs += run_block(block, s)
        if spec.after:
            spec.after(s, outputs)


def test_every_command_block_runs_or_is_skipped_with_a_reason() -> None:
    runnable = {p for p, bs in BLOCKS.items() if any((p, b.first) not in SKIPPED for b in bs)}
    assert runnable == set(PAGES), "a page with commands has no setup (or a setup, none)"
    firsts = {(p, b.first) for p, bs in BLOCKS.items() for b in bs}
    assert set(SKIPPED) <= firsts, sorted(set(SKIPPED) - firsts)  # no stale entry


def test_readme_serves_as_the_serving_page() -> None:
    readme = [b.text for b in BLOCKS["README.md"] if b.first.startswith("export VLLM_")]
    serving = [b.text for b in BLOCKS[SERVING_PAGE] if b.first.startswith("export VLLM_")]
    assert len(serving) == 1 and readme == serving


def test_the_client_script_is_shown_whole() -> None:
    text = (ROOT / SERVING_PAGE).read_text(encoding="utf-8")
    shown = re.findall(r"```python\n(.*?)```", text, re.S)
    assert EXAMPLE_CLIENT.read_text(encoding="utf-8") in shown


def test_install_from_a_clone_is_the_makefile_s() -> None:
    """The install block runs the Makefile's pip commands (its .venv steps), in order."""
    block = next(b for b in BLOCKS[CONCEPTS_PAGE] if b.first.startswith("python3 -m venv"))
    shown = [ln.split("#")[0].strip() for ln in block.text.splitlines()
             if ln.strip().startswith("pip ")]
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipes = [make[make.index(t):].split("\n\n")[0]
               for t in ("$(STAMP): pyproject.toml", "$(VLLM_STAMP): $(STAMP)")]
    done = [re.sub(r"\s+(--quiet|\|\| true)", "", ln.strip().replace("$(PY) -m ", ""))
            for recipe in recipes for ln in recipe.splitlines() if "-m pip" in ln]
    assert shown == done


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m) for m in re.findall(r"^#+ (.*)$", text, re.M)}


def test_no_page_cites_a_document_the_reader_does_not_have() -> None:
    """The contract's rules are stated in docs/concepts.md; no page sends the reader to SPEC."""
    citing = [f"{p.relative_to(ROOT)}:{n}" for p in PAGE_FILES
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\bSPEC\b", line)]
    assert citing == []


def test_every_link_into_a_page_lands_on_a_heading() -> None:
    broken = []
    for page in PAGE_FILES:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([\w-]+)\)",
                                         page.read_text(encoding="utf-8")):
            dest = (page.parent / target).resolve() if target else page
            if not dest.is_file() or anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert broken == []
