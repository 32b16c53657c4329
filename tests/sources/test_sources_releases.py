"""Two releases of one package side by side: an anchor is verified only against its release."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from residentkv.lowering.anchors import Verifier, make_anchor
from residentkv.lowering.descriptor import SourceAnchor
from residentkv.lowering.sources import open_root
from residentkv.sources.pins import Pin
from residentkv.sources.roots import cached_roots

V1 = "def evict(block):\n    return True\n"
V2 = "def evict(block):\n    log(block)\n    return True\n"


def test_each_anchor_verifies_against_the_release_it_names(
        wheel_factory: Callable[..., Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    wheel_factory("rt", "1.0", {"rt/pool.py": V1}, folder=cache)
    wheel_factory("rt", "2.0", {"rt/pool.py": V2}, folder=cache)
    pins = (Pin("rt", "rt", "1.0"), Pin("rt", "rt", "2.0"))
    roots, absent = cached_roots(cache, pins)
    assert not absent and set(roots) == {"rt", "rt==1.0", "rt==2.0"}
    assert roots["rt"] is roots["rt==1.0"]  # the first pin is the package's primary release
    a1 = SourceAnchor(**make_anchor(roots["rt==1.0"], "rt/pool.py:evict", "1.0"))
    a2 = SourceAnchor(**make_anchor(roots["rt==2.0"], "rt/pool.py:evict", "2.0"))
    v = Verifier(roots)
    # one Verifier, both releases: the parsed file is cached per root, never per package name
    assert v.verify("a1", a1, tmp_path).result == "verified"
    assert v.verify("a2", a2, tmp_path).result == "verified"
    stale = a1.model_copy(update={"version": "2.0"})  # 1.0 text claimed for 2.0
    assert v.verify("s", stale, tmp_path).result == "drifted"


def test_a_root_of_another_release_is_never_used(wheel_factory: Callable[..., Path],
                                                 tmp_path: Path) -> None:
    path = wheel_factory("rt", "1.0", {"rt/pool.py": V1})
    root = open_root("rt", path)
    anchor = SourceAnchor(**make_anchor(root, "rt/pool.py:evict", "3.0"))
    root.version = "1.0"
    r = Verifier({"rt": root}).verify("a", anchor, tmp_path)
    assert r.result == "unverifiable" and "holds 1.0" in r.detail
    root.version = None  # a --source root of unknown release is taken as given
    assert Verifier({"rt": root}).verify("a", anchor, tmp_path).result == "verified"
