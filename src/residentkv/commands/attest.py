"""``residentkv attest``: sign traces, generate keys, verify trace and verdict attestations.

``residentkv attest TRACE... --key KEY --artifact ARTIFACT`` (the same as ``attest sign``)
writes ``TRACE.intoto.json`` beside each trace: a DSSE-signed in-toto Statement binding the
trace's sha256, runtime (name, version, artifact digest), emitter, claims and modes.
``attest keygen KEY`` writes an ed25519 key pair (``KEY``, ``KEY.pub``). ``attest verify
FILE... --trust POLICY --resource-uri URI`` verifies signed verdicts (``check --attest``,
``audit --attest``); with ``--kind trace`` it verifies trace attestations (against the trace
beside them) instead. A statement of the other kind is refused. Exit 0: every file verified;
1: some signature, key, binding or kind does not hold; 2: unusable input.
"""

from __future__ import annotations

from pathlib import Path

import click

from residentkv.errors import UsageError
from residentkv.trust.attest import Kind, attest_trace, verify_attestation
from residentkv.trust.envelope import generate_key_pair, load_private_key
from residentkv.trust.policy import load_policy
from residentkv.trust.verdicts import shown

__all__ = ["attest"]


class _AttestGroup(click.Group):
    """``attest TRACE...`` is ``attest sign TRACE...``: anything that is not a subcommand
    name goes to ``sign``."""

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands:
            return "sign", self.commands["sign"], args
        return super().resolve_command(ctx, args)


@click.group("attest", cls=_AttestGroup, invoke_without_command=False,
             context_settings={"ignore_unknown_options": True,
                               "allow_interspersed_args": False})
def attest() -> None:
    """Sign traces (attest TRACE --key KEY --artifact A), make keys, verify attestations."""


@attest.command("sign")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--key", "key", type=click.Path(dir_okay=False), default=None,
              help="ed25519 private key (PEM) to sign with.")
@click.option("--generate-key", "generate", type=click.Path(dir_okay=False), default=None,
              help="Write a new key pair here (and PATH.pub), then sign with it.")
@click.option("--artifact", "artifact", required=True,
              help="The runtime artifact the trace was recorded on: a wheel/sdist file, "
                   "sha256:HEX, or 'installed' (the installed distribution's RECORD).")
@click.option("--emitter-distribution", "emitter_dist", default=None, metavar="DIST",
              help="The distribution that ships the emitter (an adapter's): the trace then "
                   "binds rows RUNTIME+DIST. Without it the trace binds only rows of a runtime "
                   "whose own distribution ships the emitter's module.")
def sign(traces: tuple[str, ...], key: str | None, generate: str | None, artifact: str,
         emitter_dist: str | None) -> None:
    """Sign each TRACE: write TRACE.intoto.json beside it."""
    if (key is None) == (generate is None):
        raise UsageError("give exactly one of --key KEY or --generate-key PATH")
    if generate is not None:
        public, keyid = generate_key_pair(Path(generate))
        click.echo(f"attest: new key {keyid[:16]}: private {generate}, public {public}",
                   err=True)
        key = generate
    assert key is not None
    signer = load_private_key(Path(key))
    for t in traces:
        click.echo(f"attest: {shown(attest_trace(Path(t), signer, artifact, emitter_dist))}")


@attest.command("keygen")
@click.argument("path", type=click.Path(dir_okay=False))
def keygen(path: str) -> None:
    """Write a new ed25519 key pair: PATH (private, mode 0600) and PATH.pub."""
    public, keyid = generate_key_pair(Path(path))
    click.echo(f"attest: key {keyid}: private {path}, public {public}")


@attest.command("verify")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--trust", "trust", required=True, type=click.Path(dir_okay=False),
              help="Trust policy: the keys trusted, and what each may vouch for.")
@click.option("--kind", "kind", type=click.Choice([k.value for k in Kind]),
              default=Kind.VERDICT.value, show_default=True,
              help="What each FILE must be, told by its statement's predicate type: a signed "
                   "verdict, or a trace attestation (TRACE.intoto.json beside its trace). A "
                   "statement of the other kind is refused.")
@click.option("--resource", "resources", multiple=True, type=click.Path(dir_okay=False),
              help="A file a verdict names (descriptor, bundle, trace, archive), matched by "
                   "file name; a resource not given is looked for at the path it names.")
@click.option("--resource-uri", "resource_uri", default=None,
              help="The resourceUri the verdict must carry, exactly (required for verdicts): "
                   "residentkv:check: (or residentkv:audit:) and the descriptor paths as the "
                   "check was given them, comma-separated.")
@click.pass_context
def verify(ctx: click.Context, files: tuple[str, ...], trust: str, kind: str,
           resources: tuple[str, ...], resource_uri: str | None) -> None:
    """Verify signed verdicts (default) or trace attestations against a trust policy.

    A verdict verifies only when a trusted key signed it, its result is PASSED, its
    resourceUri is exactly --resource-uri and every resource it names matches the file given
    or found (exit 1 otherwise, saying what differs).
    """
    expected = Kind(kind)
    if expected is Kind.VERDICT and resource_uri is None:
        raise UsageError("attest verify: give --resource-uri URI, the resource the verdict "
                         "must be about (residentkv:check:DESCRIPTOR[,DESCRIPTOR...]); or "
                         "--kind trace to verify trace attestations")
    if expected is Kind.TRACE and (resources or resource_uri is not None):
        raise UsageError("attest verify --kind trace: --resource and --resource-uri are for "
                         "verdicts; a trace attestation is checked against the trace beside it")
    policy = load_policy(trust)
    ok = True
    for f in files:
        checked = verify_attestation(Path(f), policy, expected, [Path(r) for r in resources],
                                     resource_uri)
        ok &= checked.ok
        for line in checked.lines:
            click.echo(("ok   " if checked.ok else "FAIL ") + line
                       if line is checked.lines[0] else line)
    ctx.exit(0 if ok else 1)
