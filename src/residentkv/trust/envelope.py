"""DSSE envelopes of in-toto Statements, signed and checked with ed25519 keys.

The cryptography is securesystemslib's (DSSE pre-authentication encoding, signature checks) on
pyca/cryptography (ed25519): nothing here hashes, encodes or compares signatures by hand. Keys
are PEM files: a PKCS#8 private key to sign, its SubjectPublicKeyInfo public key to verify. A
key's id is the one securesystemslib derives from the public key itself, so a signature names
the key that made it and no label can be swapped in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer._crypto_signer import CryptoSigner
from securesystemslib.signer._key import Key, SSlibKey

from residentkv.errors import UserInputError
from residentkv.limits import MAX_JSON_DEPTH, json_depth_ok, read_bounded

__all__ = [
    "PAYLOAD_TYPE",
    "EnvelopeError",
    "KeyFileError",
    "generate_key_pair",
    "load_private_key",
    "load_public_key",
    "open_envelope",
    "sign_statement",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: a key file or an envelope is small; anything larger is not one
_MAX_KEY_BYTES = 64 * 1024
_MAX_ENVELOPE_BYTES = 16 * 1024 * 1024
#: an envelope is an object holding a list of signature objects: three levels deep
_MAX_ENVELOPE_DEPTH = 4
_MAX_SIGNATURES = 16


class KeyFileError(UserInputError):
    """A key file that cannot be used (exit code 2, located at the file)."""

    code = "L011"


class EnvelopeError(UserInputError):
    """An attestation file that is not a well-formed DSSE envelope of an in-toto Statement."""

    code = "L012"


def load_private_key(path: Path) -> CryptoSigner:
    """An ed25519 signer from a PEM (PKCS#8, unencrypted) private key file."""
    pem = read_bounded(path, "private key", _MAX_KEY_BYTES)
    try:
        key = load_pem_private_key(pem, None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise KeyFileError(f"not an unencrypted PEM private key: {e}; expected an ed25519 key "
                        "written by `residentkv attest keygen`", path=str(path), line=1,
                        col=1) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"a {type(key).__name__} key; expected ed25519", path=str(path),
                        line=1, col=1)
    return CryptoSigner(key)


def load_public_key(path: Path) -> SSlibKey:
    """An ed25519 public key from a PEM file (its key id derived from the key)."""
    pem = read_bounded(path, "public key", _MAX_KEY_BYTES)
    try:
        key = load_pem_public_key(pem)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise KeyFileError(f"not a PEM public key: {e}; expected an ed25519 public key "
                        "(the .pub file `residentkv attest keygen` writes)", path=str(path),
                        line=1, col=1) from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"a {type(key).__name__} key; expected ed25519", path=str(path),
                        line=1, col=1)
    return SSlibKey.from_crypto(key)


def generate_key_pair(private: Path) -> tuple[Path, str]:
    """Write a new ed25519 key pair: *private* (mode 0600) and ``*private*.pub``.

    Returns the public key file and the key id. An existing file is never overwritten.
    """
    public = private.with_name(private.name + ".pub")
    for p in (private, public):
        if p.exists():
            raise UserInputError(f"{p} exists; expected a new file (keys are never "
                                 "overwritten)", code="L002", path=str(p))
    key = Ed25519PrivateKey.generate()
    signer = CryptoSigner(key)
    pub = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(signer.private_bytes)
        public.write_bytes(pub)
    except OSError as e:
        raise UserInputError(f"cannot write the key pair: {e.strerror or e}", code="L002",
                             path=str(private)) from None
    return public, signer.public_key.keyid


def sign_statement(statement: dict[str, Any], signer: CryptoSigner) -> dict[str, Any]:
    """The DSSE envelope (as JSON) of *statement*, signed by *signer*."""
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    env = Envelope(payload=payload, payload_type=PAYLOAD_TYPE, signatures={})
    env.sign(signer)
    return env.to_dict()


def _envelope_shape_problem(doc: Any) -> str | None:
    """What is wrong with the JSON types of an envelope, in the user's terms (None: nothing),
    checked before the DSSE library sees it, so a wrong type is named, never a Python error."""
    if not isinstance(doc, dict):
        return f"the document is a {type(doc).__name__}, not an object"
    for key in ("payload", "payloadType"):
        if not isinstance(doc.get(key), str):
            return f"{key} is {type(doc.get(key)).__name__}, not a string"
    sigs = doc.get("signatures")
    if not isinstance(sigs, list) or not all(
            isinstance(sig, dict) and isinstance(sig.get("keyid"), str)
            and isinstance(sig.get("sig"), str) for sig in sigs):
        return "signatures is not a list of {keyid, sig} strings"
    return None


def open_envelope(data: bytes, keys: list[Key], where: str) -> tuple[dict[str, Any], str]:
    """``(statement, key id)`` of an envelope one of *keys* signed.

    Raises :class:`EnvelopeError` when the file is not an envelope of an in-toto Statement,
    and :class:`VerificationError` when no key given verifies its signature.
    """
    if not json_depth_ok(data, _MAX_ENVELOPE_DEPTH):
        raise EnvelopeError(f"nested deeper than {_MAX_ENVELOPE_DEPTH} levels; expected a DSSE "
                            "envelope (an object of strings and a list of signatures)",
                            path=where)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise EnvelopeError(f"not JSON: {e}; expected a DSSE envelope", path=where) from None
    problem = _envelope_shape_problem(doc)
    if problem is not None:
        raise EnvelopeError(f"not a DSSE envelope: {problem}; expected {{payload: str, "
                            "payloadType: str, signatures: [{keyid: str, sig: str}]}",
                            path=where)
    try:
        env = Envelope.from_dict(doc)
    except (ValueError, KeyError, TypeError) as e:  # e.g. a payload that is not base64
        raise EnvelopeError(f"not a DSSE envelope: {e}", path=where) from None
    if env.payload_type != PAYLOAD_TYPE:
        raise EnvelopeError(f"payloadType {env.payload_type!r}; expected {PAYLOAD_TYPE}",
                            path=where)
    if not keys:
        raise VerificationError("no trusted key to verify it with")
    if len(doc["signatures"]) > _MAX_SIGNATURES:
        raise EnvelopeError(f"{len(doc['signatures'])} signatures; expected at most "
                            f"{_MAX_SIGNATURES}", path=where)
    accepted = env.verify(keys, 1)
    if not json_depth_ok(env.payload, MAX_JSON_DEPTH):
        raise EnvelopeError(f"the signed statement is nested deeper than {MAX_JSON_DEPTH} "
                            "levels; expected an in-toto Statement", path=where)
    try:
        statement = json.loads(env.payload)
    except (ValueError, RecursionError) as e:
        raise EnvelopeError(f"the signed payload is not JSON: {e}", path=where) from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError(f"the signed payload is not an in-toto Statement; expected _type "
                            f"{STATEMENT_TYPE}", path=where)
    return statement, next(iter(accepted))


def read_envelope_bytes(path: Path) -> bytes:
    """The bytes of an attestation file (bounded; a located error when unreadable)."""
    return read_bounded(path, "attestation", _MAX_ENVELOPE_BYTES)


__all__ += ["STATEMENT_TYPE", "VerificationError", "read_envelope_bytes"]
