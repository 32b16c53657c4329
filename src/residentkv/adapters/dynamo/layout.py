"""Where the fleet's files go and how each process is started (pure: no process is run here).

Everything binds 127.0.0.1 inside the fleet's private network namespace. Ports are fixed: the
namespace is new for every run, so nothing else can hold them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BLOCK", "FRONTEND_PORT", "MAX_MODEL_LEN", "REPLICAS", "FleetLayout", "Replica"]

SERVED_MODEL_NAME = "tiny-llama"
#: the claims of residentkv.adapters.vllm.witness.make_claim are for 128-token blocks; the CPU
#: attention backend needs a multiple of 32
BLOCK = 128
MAX_MODEL_LEN = 1024
FRONTEND_PORT = 8000
HOST = "127.0.0.1"
NAMESPACE = "dynamo"
REPLICAS = ("A", "B")
#: fleet-wide Dynamo transport: no etcd, no NATS
TRANSPORT = ("--discovery-backend", "file", "--request-plane", "tcp", "--event-plane", "zmq")


@dataclass(frozen=True)
class Replica:
    """One vLLM worker: its name, its files and its ports."""

    name: str
    index: int
    run_dir: Path

    @property
    def trace(self) -> Path:
        return self.run_dir / "traces" / f"replica-{self.name}.jsonl"

    @property
    def control_socket(self) -> Path:
        return self.run_dir / "sockets" / f"replica-{self.name}.sock"

    @property
    def kv_events_endpoint(self) -> str:
        # ipc://, never tcp://: a tcp endpoint fails silently (no events reach the router)
        return f"ipc://{self.run_dir / 'sockets' / f'kv-events-{self.name}.ipc'}"

    @property
    def system_port(self) -> int:
        return 9100 + self.index

    @property
    def rpc_port(self) -> int:
        return 9200 + self.index

    @property
    def cpu(self) -> str:
        # one core each on the 2-core machine, so the two engines do not fight over both
        return str(self.index % 2)

    @property
    def log(self) -> Path:
        return self.run_dir / "logs" / f"worker-{self.name}.log"

    def transfer_config(self, host_tier_bytes: int) -> dict[str, Any]:
        """``--kv-transfer-config``: ResidentClaimConnector with this replica's sink, socket
        and name (its stream's ``stream_started`` names the replica; docs/vllm-adapter.md)."""
        return {
            "kv_connector": "ResidentClaimConnector",
            "kv_connector_module_path": "residentkv.adapters.vllm",
            "kv_role": "kv_both",
            "kv_load_failure_policy": "fail",
            "kv_connector_extra_config": {
                "host_tier_bytes": host_tier_bytes,
                "event_sink": str(self.trace),
                "control_socket": str(self.control_socket),
                "replica": self.name,
            },
        }

    def kv_events_config(self) -> dict[str, Any]:
        return {"enable_kv_cache_events": True, "publisher": "zmq",
                "endpoint": self.kv_events_endpoint, "topic": "kv-events"}


@dataclass(frozen=True)
class FleetLayout:
    """The run's directories, the model, and every process's command line and environment."""

    run_dir: Path
    python: str
    host_tier_bytes: int = 64 << 20
    session_ttl_secs: int = 600

    @property
    def model_dir(self) -> Path:
        return self.run_dir / "tiny-llama"

    @property
    def discovery_dir(self) -> Path:
        return self.run_dir / "discovery"

    @property
    def frontend_log(self) -> Path:
        return self.run_dir / "logs" / "frontend.log"

    @property
    def frontend_url(self) -> str:
        return f"http://{HOST}:{FRONTEND_PORT}"

    def replicas(self) -> tuple[Replica, ...]:
        return tuple(Replica(name, i + 1, self.run_dir) for i, name in enumerate(REPLICAS))

    def make_dirs(self) -> None:
        for sub in ("traces", "sockets", "logs", "discovery"):
            (self.run_dir / sub).mkdir(parents=True, exist_ok=True)

    def base_env(self) -> dict[str, str]:
        return {
            "DYN_FILE_KV": str(self.discovery_dir),
            "DYN_NAMESPACE": NAMESPACE,
            "DYN_EVENT_PLANE_HOST": HOST,
            "DYN_TCP_RPC_HOST": HOST,
            "DYN_SYSTEM_HOST": HOST,
            "DYN_VLLM_ENABLE_INFERENCE_V1_GENERATE": "1",
            "DYN_LOG": "info",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
        }

    @property
    def client_log(self) -> Path:
        """The harness's own Dynamo client's log (its stderr while the scenarios run)."""
        return self.run_dir / "logs" / "client.log"

    def frontend_command(self) -> list[str]:
        return [self.python, "-m", "dynamo.frontend", "--router-mode", "kv",
                "--http-host", HOST, "--http-port", str(FRONTEND_PORT),
                "--kv-cache-block-size", str(BLOCK),
                # a claim's session stays on the replica that took it (see docs/fleet.md)
                "--router-session-affinity-ttl-secs", str(self.session_ttl_secs),
                *TRANSPORT]

    def worker_command(self, replica: Replica) -> list[str]:
        return [self.python, "-m", "residentkv.adapters.dynamo.worker_main",
                "--model", str(self.model_dir), "--served-model-name", SERVED_MODEL_NAME,
                "--load-format", "dummy", "--dtype", "float32", "--seed", "0",
                "--enforce-eager", "--enable-prefix-caching",
                "--block-size", str(BLOCK), "--max-model-len", str(MAX_MODEL_LEN),
                "--kv-events-config", json.dumps(replica.kv_events_config()),
                "--kv-transfer-config",
                json.dumps(replica.transfer_config(self.host_tier_bytes)),
                *TRANSPORT]

    def worker_env(self, replica: Replica) -> dict[str, str]:
        return {
            **self.base_env(),
            "DYN_SYSTEM_ENABLED": "true",
            "DYN_SYSTEM_PORT": str(replica.system_port),
            "DYN_TCP_RPC_PORT": str(replica.rpc_port),
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": replica.cpu,
            "RESIDENTKV_FLEET_REPLICA": replica.name,
        }
