"""Roots of trust (SPEC §7.1): which traces may *grant*, and signed statements in and out.

* :mod:`~residentkv.trust.roots` decides the root of one trace: ``live`` (this run produced
  it), ``package`` (it ships inside the installed residentkv and matches the digest the
  distribution lists), ``attested`` (a DSSE-signed in-toto Statement by a key the trust policy
  names for its emitter and runtime), or none (the trace is *cited*: it may refuse, never grant);
* :mod:`~residentkv.trust.package` is the package root's digest index;
* :mod:`~residentkv.trust.policy` reads a trust policy (``--trust FILE``): key -> what it may vouch
  for;
* :mod:`~residentkv.trust.envelope` signs and opens DSSE envelopes (securesystemslib, ed25519);
* :mod:`~residentkv.trust.statements` builds the trace and verdict Statements.
"""
