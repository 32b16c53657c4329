"""Prometheus metrics of an observation (``residentkv observe --metrics-port``).

- ``residentkv_observed_claims{state}``: claims per live state (pending, held, at_risk, lost,
  unknown);
- ``residentkv_observed_claim_losses_total{claim_mode}``: claims that lost a needed block
  after materializing;
- ``residentkv_observed_event_gaps_total``: ``observation_gap`` events written;
- ``residentkv_observed_time_to_loss_seconds``: runtime time from materialization to loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from residentkv.observe.claims import ObservedClaim
from residentkv.observe.observer import ClaimStatus
from residentkv.observe.sequence import Cause

_BUCKETS = (0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    """A listener of the observer that keeps its Prometheus series (own registry)."""

    def __init__(self, claims: Sequence[ObservedClaim]) -> None:
        self.registry = CollectorRegistry()
        self.claims = Gauge("residentkv_observed_claims", "Observed claims per state",
                            ["state"], registry=self.registry)
        for state in ClaimStatus:
            self.claims.labels(state=state.value).set(0)
        self.losses = Counter("residentkv_observed_claim_losses",
                              "Claims that lost a needed block after materializing",
                              ["claim_mode"], registry=self.registry)
        self.gaps = Counter("residentkv_observed_event_gaps",
                            "Runs of runtime event batches the observer did not see",
                            registry=self.registry)
        self.time_to_loss = Histogram("residentkv_observed_time_to_loss_seconds",
                                      "Runtime time from materialization to loss",
                                      buckets=_BUCKETS, registry=self.registry)
        self._server: Any = None

    def status_changed(self, claim: ObservedClaim, old: ClaimStatus | None,
                       new: ClaimStatus) -> None:
        if old is not None:
            self.claims.labels(state=old.value).dec()
        self.claims.labels(state=new.value).inc()

    def lost(self, claim: ObservedClaim, held_for_s: float | None) -> None:
        self.losses.labels(claim_mode=claim.claim.protection_mode.value).inc()
        if held_for_s is not None:
            self.time_to_loss.observe(held_for_s)

    def gap(self, reason: Cause) -> None:
        self.gaps.inc()

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on *addr*:*port* (0: any free port); return the port."""
        server, _thread = start_http_server(port, addr, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
