"""The nemesis: a fault schedule planned from the seed, and the thread that applies it.

Each fault is applied through what an operator has: the engine's control socket (failure
injection, corrupted copies, releases), ordinary requests (a burst of registrations that fills
the host tier), and signals to processes the harness started (SIGKILL to the EngineCore, SIGTERM
to the API server), each followed by a restart on the same event sink. Faults are applied one at
a time, at their planned second or as soon as the previous one is done; a fault that cannot be
applied (a process fault on an attached server, a session without a claim yet, the run's end) is
recorded with the reason, never silently dropped.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

from residentkv.adapters.vllm.chaos.deployment import Deployment, LoadWindow
from residentkv.adapters.vllm.chaos.model import FaultKind, FaultRecord
from residentkv.adapters.vllm.control_socket import ControlError

__all__ = ["PROCESS_FAULTS", "Nemesis", "PlannedFault", "plan_faults"]

#: faults that end a server incarnation (a restart on the same sink follows each)
PROCESS_FAULTS = frozenset({FaultKind.KILL_ENGINE, FaultKind.TERMINATE_SERVER})
#: faults aimed at one session's current claim
CLAIM_FAULTS = frozenset({FaultKind.INJECT_FAILURE, FaultKind.CORRUPT_COPY,
                          FaultKind.OPERATOR_RELEASE})


@dataclass(frozen=True)
class PlannedFault:
    """One fault of the schedule: what, when (after how many seconds of serving load), at
    whom."""

    kind: FaultKind
    at: float
    target_session: str | None = None
    #: registrations of a host-tier pressure burst, and how long they are held
    burst: int = 0
    hold_s: float = 0.0


def plan_faults(seed: int, kinds: tuple[FaultKind, ...], duration_s: float,
                sessions: list[str], per_kind: int = 1, burst: int = 16) -> list[PlannedFault]:
    """The schedule: *per_kind* of each kind, spread over the middle of the load in a seeded
    order, each at a seeded second of its own slot (the order *kinds* are listed in does not
    matter)."""
    rng = random.Random(f"{seed}/nemesis")
    order = [k for k in FaultKind if k in kinds for _ in range(per_kind)]
    rng.shuffle(order)
    if not order:
        return []
    start, end = 0.1 * duration_s, 0.8 * duration_s
    slot = (end - start) / len(order)
    plan = []
    for i, kind in enumerate(order):
        at = start + slot * i + rng.uniform(0.0, 0.3 * slot)
        target = rng.choice(sessions) if kind in CLAIM_FAULTS and sessions else None
        plan.append(PlannedFault(
            kind=kind, at=round(at, 3), target_session=target,
            burst=burst if kind is FaultKind.HOST_TIER_PRESSURE else 0,
            hold_s=round(0.5 * slot, 3) if kind is FaultKind.HOST_TIER_PRESSURE else 0.0))
    return plan


#: the current claim id of a session (None before its first registration)
CurrentClaim = Callable[[str], str | None]
#: sends a pressure burst of n registrations (fault index, n) -> the claim ids accepted
PressureBurst = Callable[[int, int], list[str]]


class Nemesis:
    """Applies a schedule to a deployment, one fault at a time, on its own thread."""

    def __init__(self, plan: list[PlannedFault], deployment: Deployment, *,
                 current_claim: CurrentClaim, pressure: PressureBurst,
                 window: LoadWindow) -> None:
        self.plan = plan
        self.deployment = deployment
        self.current_claim = current_claim
        self.pressure = pressure
        self.window = window
        self.records: list[FaultRecord] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos-nemesis", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        for index, fault in enumerate(self.plan):
            while self.window.served() < fault.at and not self.window.over() \
                    and not self.stop.is_set():
                self.stop.wait(min(fault.at - self.window.served(), 0.5))
            if self.window.over() or self.stop.is_set():
                self.records.append(self._record(fault, applied=False,
                                                 detail="not applied: the load had ended"))
                continue
            self.records.append(self._apply(index, fault))

    def _record(self, fault: PlannedFault, *, applied: bool, detail: str,
                claim: str | None = None, started: float | None = None) -> FaultRecord:
        return FaultRecord(kind=fault.kind, due_after_s=fault.at,
                           target_session=fault.target_session, claim_id=claim,
                           started_at=None if started is None else round(started, 3),
                           ended_at=round(self.deployment.now(), 3) if applied else None,
                           applied=applied, detail=detail)

    def _apply(self, index: int, fault: PlannedFault) -> FaultRecord:
        started = self.deployment.now()
        if fault.kind in PROCESS_FAULTS and not self.deployment.managed:
            return self._record(fault, applied=False, started=started,
                                detail="not applied: the harness does not signal a server it "
                                       "did not start (attached deployment)")
        if not self.deployment.wait_up(300.0):
            return self._record(fault, applied=False, started=started,
                                detail="not applied: the server did not come back up")
        claim = self.current_claim(fault.target_session) if fault.target_session else None
        if fault.kind in CLAIM_FAULTS and claim is None:
            return self._record(fault, applied=False, started=started,
                                detail=f"not applied: {fault.target_session} has no claim yet")
        try:
            detail = self._do(index, fault, claim)
        except (ControlError, OSError, RuntimeError) as exc:
            return self._record(fault, applied=False, claim=claim, started=started,
                                detail=f"failed: {type(exc).__name__}: {exc}")
        return self._record(fault, applied=True, claim=claim, started=started, detail=detail)

    def _do(self, index: int, fault: PlannedFault, claim: str | None) -> str:
        control = self.deployment.control()
        if fault.kind is FaultKind.INJECT_FAILURE:
            control.configure(failure_injection=[{"claim_id": claim, "mode": "once"}])
            return f"rule set: fail the next load of {claim} once (replaces earlier rules)"
        if fault.kind is FaultKind.CORRUPT_COPY:
            control.configure(failure_injection=[{"claim_id": claim, "mode": "corrupt"}])
            return f"rule set: corrupt the stored copy of {claim} before its next load"
        if fault.kind is FaultKind.OPERATOR_RELEASE:
            released = control.release_claims([str(claim)], reason="chaos: operator release")
            return f"release {claim}: {released} live claim(s) released"
        if fault.kind is FaultKind.HOST_TIER_PRESSURE:
            return self._pressure(index, fault)
        if fault.kind is FaultKind.KILL_ENGINE:
            return self.deployment.kill_engine() + "; " + self.deployment.restart()
        return self.deployment.terminate() + "; " + self.deployment.restart()

    def _pressure(self, index: int, fault: PlannedFault) -> str:
        held = self.pressure(index, fault.burst)
        self.stop.wait(fault.hold_s)
        if not held:
            return f"{fault.burst} registrations sent, none accepted"
        if not self.deployment.wait_up(300.0):
            return (f"{fault.burst} registrations sent, {len(held)} accepted; not released: "
                    "the server did not come back up")
        released = self.deployment.control().release_claims(
            held, reason="chaos: pressure released")
        return (f"{fault.burst} registrations sent, {len(held)} accepted, held "
                f"{fault.hold_s:.1f} s, then {released} released by the operator")
