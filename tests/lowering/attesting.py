"""Test helper: attest traces with a fresh ed25519 key and a policy that trusts it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from residentkv.trust.attest import attest_trace
from residentkv.trust.envelope import generate_key_pair, load_private_key
from residentkv.trust.policy import load_policy
from residentkv.trust.roots import TraceTrust

ARTIFACT = "sha256:" + "ab" * 32


def policy_file(folder: Path, emitters: Iterable[str] = ("toyrt.scheduler",),
                runtimes: Iterable[str] = ("toyrt",), *, verdicts: bool = False,
                name: str = "key") -> tuple[Path, Path]:
    """(private key, policy) in *folder*: a new key trusted for *emitters* on *runtimes*."""
    key = folder / name
    if not key.exists():
        generate_key_pair(key)
    policy = folder / f"{name}-policy.yaml"
    policy.write_text(f"""schema: residentkv.trust/v1
keys:
  {name}:
    public_key: {name}.pub
    emitters: [{", ".join(emitters)}]
    runtimes: [{", ".join(runtimes)}]
    verdicts: {str(verdicts).lower()}
""")
    return key, policy


def attested(folder: Path, traces: Iterable[Path],
             emitters: Iterable[str] = ("toyrt.scheduler",),
             runtimes: Iterable[str] = ("toyrt",), name: str = "key") -> TraceTrust:
    """Attest every trace with a new key; the roots of trust that trust it for these names."""
    key, policy = policy_file(folder, emitters, runtimes, name=name)
    signer = load_private_key(key)
    for t in traces:
        attest_trace(t, signer, ARTIFACT)
    return TraceTrust(policy=load_policy(policy))
