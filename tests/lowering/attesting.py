"""Test helpers for the roots of trust: attest traces with a fresh ed25519 key and a policy that
trusts it; a site-packages-like source root holding two distributions."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from residentkv.trust.attest import attest_trace
from residentkv.trust.envelope import generate_key_pair, load_private_key
from residentkv.trust.policy import load_policy
from residentkv.trust.roots import TraceTrust

TREE = Path(__file__).resolve().parents[1] / "data" / "lowering" / "tree"
#: the toy release's artifact as its source root holds it: the installed RECORD's digest
ARTIFACT = str(TREE / "toyrt-0.1.dist-info" / "RECORD")


def policy_file(folder: Path, emitters: Iterable[str] = ("toyrt.scheduler",),
                runtimes: Iterable[str] = ("toyrt",), *, verdicts: bool = False,
                name: str = "key", distributions: Iterable[str] = ()) -> tuple[Path, Path]:
    """(private key, policy) in *folder*: a new key trusted for *emitters* on *runtimes*,
    allowed to speak for *distributions*."""
    key = folder / name
    if not key.exists():
        generate_key_pair(key)
    policy = folder / f"{name}-policy.yaml"
    speaks = f"    distributions: [{', '.join(distributions)}]\n" if distributions else ""
    policy.write_text(f"""schema: residentkv.trust/v1
keys:
  {name}:
    public_key: {name}.pub
    emitters: [{", ".join(emitters)}]
    runtimes: [{", ".join(runtimes)}]
{speaks}    verdicts: {str(verdicts).lower()}
""")
    return key, policy


def attested(folder: Path, traces: Iterable[Path],
             emitters: Iterable[str] = ("toyrt.scheduler",),
             runtimes: Iterable[str] = ("toyrt",), name: str = "key",
             emitter_distribution: str | None = None,
             distributions: Iterable[str] = ()) -> TraceTrust:
    """Attest every trace with a new key; the roots of trust that trust it for these names
    (and, for *distributions*, to say which distribution ships the emitter)."""
    key, policy = policy_file(folder, emitters, runtimes, name=name,
                              distributions=distributions)
    signer = load_private_key(key)
    for t in traces:
        attest_trace(t, signer, ARTIFACT, emitter_distribution)
    return TraceTrust(policy=load_policy(policy))


def two_distribution_site(folder: Path) -> Path:
    """``folder/site``: a site-packages-like root holding two distributions, toyrt 0.1 (the toy
    tree, plus a line that names the other's emitter) and betart 2.0."""
    site = folder / "site"
    shutil.copytree(TREE, site)
    (site / "toyrt" / "compat.py").write_text("import betart.scheduler  # betart.scheduler\n")
    (site / "betart").mkdir()
    (site / "betart" / "__init__.py").write_text('"""betart."""\n')
    (site / "betart-2.0.dist-info").mkdir()
    (site / "betart-2.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: betart\nVersion: 2.0\n")
    return site
