"""``python -m residentkv.adapters.dynamo run --out fleet-out``: one fleet run, end to end.

Must run inside a fresh network namespace (``make fleet`` starts it under ``unshare --net``):
Dynamo's ZMQ event-plane publishers bind 0.0.0.0 whatever ``DYN_EVENT_PLANE_HOST`` says, and
in the namespace only loopback exists. Exit 0 only when every scenario held; 1 when a scenario
failed or a step could not be carried out (the step is named, with its process's log tail).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from residentkv.adapters.dynamo import scenarios as sc
from residentkv.adapters.dynamo.discovery import instance_ids
from residentkv.adapters.dynamo.driver import Driver
from residentkv.adapters.dynamo.judging import (
    failure_outcome_passes,
    fleet_judgement,
    observation_passes,
)
from residentkv.adapters.dynamo.layout import MAX_MODEL_LEN, SERVED_MODEL_NAME, FleetLayout
from residentkv.adapters.dynamo.procs import (
    Proc,
    StepError,
    http_get,
    in_private_netns,
    loopback_up,
    start,
    stderr_to,
    wait_until,
)
from residentkv.adapters.dynamo.promtext import parse, total
from residentkv.adapters.dynamo.row import classify_row, runtime_sources
from residentkv.adapters.dynamo.summary import claim_metrics, format_table, router_figures
from residentkv.adapters.dynamo.supervisor import Supervisor
from residentkv.adapters.dynamo.tracefacts import read_events
from residentkv.adapters.dynamo.verdicts import SPLIT, judge_scenarios

__all__ = ["main"]

REGISTRATION_TIMEOUT_S = 600.0  # two engines start on 2 cores next to other work
EVENTS_TIMEOUT_S = 120.0


def prepare(out: Path) -> FleetLayout:
    """A clean output directory with the tiny model and its tokenizer."""
    from residentkv.adapters.dynamo.tokenizer import write_tokenizer
    from residentkv.adapters.vllm.engine import TINY_LLAMA, write_tiny_model

    if out.exists():
        shutil.rmtree(out)
    layout = FleetLayout(out.resolve(), sys.executable)
    layout.make_dirs()
    write_tiny_model(layout.model_dir)
    write_tokenizer(layout.model_dir, vocab_size=int(TINY_LLAMA["vocab_size"]),
                    max_length=MAX_MODEL_LEN)
    return layout


def launch(layout: FleetLayout, procs: dict[str, Proc]) -> None:
    procs["frontend"] = start("frontend", layout.frontend_command(), layout.base_env(),
                              layout.frontend_log, layout.run_dir)
    for r in layout.replicas():
        procs[r.name] = start(f"worker {r.name}", layout.worker_command(r),
                              layout.worker_env(r), r.log, layout.run_dir)


def wait_registered(layout: FleetLayout, procs: dict[str, Proc]) -> dict[str, int]:
    def ready() -> dict[str, int] | None:
        status, body = http_get(layout.frontend_url + "/v1/models")
        ids = instance_ids(layout.discovery_dir, layout.replicas())
        return ids if status == 200 and SERVED_MODEL_NAME in body and len(ids) == 2 else None

    ids: dict[str, int] = wait_until(
        "registration", ready, timeout=REGISTRATION_TIMEOUT_S, watch=procs.values(),
        interval=2.0, what="the frontend to list the model and both workers to register")
    return ids


def stored_events_applied(layout: FleetLayout) -> float:
    _, text = http_get(layout.frontend_url + "/metrics")
    return total(parse(text), "dynamo_component_kv_cache_events_applied",
                 event_type="stored", status="ok")


async def warm_up(driver: Driver, procs: dict[str, Proc]) -> float:
    """One unclaimed request straight to each worker, then wait until the router has applied
    their KV events (a silent event path would leave it routing blind)."""
    for r in driver.layout.replicas():
        s = await driver.direct(f"warmup/{r.name}", "warmup", r.name, sc.prompt("warmup", r.index))
        if s.status != 200:
            raise StepError("warm-up", f"request to worker {r.name} failed: {s.error}",
                            procs[r.name].tail())
    return await asyncio.to_thread(
        wait_until, "kv events", lambda: stored_events_applied(driver.layout) >= 2,
        timeout=EVENTS_TIMEOUT_S, watch=procs.values(),
        what='dynamo_component_kv_cache_events_applied{event_type="stored",status="ok"} >= 2')


def scrape_workers(driver: Driver) -> dict[str, dict[str, float]]:
    out = {}
    for r in driver.layout.replicas():
        if driver.workers[r.name].alive():
            _, text = http_get(f"http://127.0.0.1:{r.system_port}/metrics")
            out[r.name] = claim_metrics(text)
    return out


async def drive(layout: FleetLayout, procs: dict[str, Proc], result: dict[str, Any]) -> None:
    ids = await asyncio.to_thread(wait_registered, layout, procs)
    result["instances"] = {k: str(v) for k, v in ids.items()}
    # from registration on, a worker whose process exits has its discovery records withdrawn
    result["supervisor"].start({r.name: (procs[r.name].pid, ids[r.name])
                                for r in layout.replicas()})
    result["timings_s"]["registered"] = round(time.monotonic() - result["t0"], 1)
    workers = {r.name: procs[r.name] for r in layout.replicas()}
    driver = Driver(layout, workers, ids)
    result["driver"] = driver
    try:
        await driver.connect()
    except Exception as exc:
        raise StepError("connect", f"cannot join the fleet's Dynamo runtime: "
                        f"{type(exc).__name__} {exc}") from None
    await warm_up(driver, procs)
    result["timings_s"]["kv_events_applied"] = round(time.monotonic() - result["t0"], 1)
    log = sc.RunLog()
    result["log"] = log
    await sc.owner_restore(driver, log)
    await sc.not_held_elsewhere(driver, log)
    await sc.cross_tenant(driver, log)
    await sc.claimed_load_failure(driver, log)
    result["worker_metrics_before_kill"] = scrape_workers(driver)
    await sc.home_killed(driver, log)
    result["worker_metrics_after_kill"] = scrape_workers(driver)
    _, result["frontend_metrics_text"] = http_get(layout.frontend_url + "/metrics")
    result["timings_s"]["scenarios_done"] = round(time.monotonic() - result["t0"], 1)


def stop_all(procs: dict[str, Proc]) -> list[str]:
    """Stop every process by its group; return any that could not be stopped."""
    left = []
    for name in ("frontend", *[n for n in procs if n != "frontend"]):
        if name in procs:
            procs[name].stop()
            if procs[name].group_pids():
                left.append(f"{name}: {procs[name].group_pids()}")
    return left


def judge(layout: FleetLayout, result: dict[str, Any]) -> dict[str, Any]:
    driver: Driver = result["driver"]
    log: sc.RunLog = result["log"]
    paths = {r.name: r.trace for r in layout.replicas()}
    traces = {name: read_events(p) for name, p in paths.items()}
    fleet = fleet_judgement(list(paths.values()))
    withdrawals = result["supervisor"].withdrawals()
    verdicts = judge_scenarios(driver.sent, traces, paths, log.claims, log.killed, fleet,
                               observation_passes, failure_outcome_passes, withdrawals)
    own, dead = verdicts[0].figures, verdicts[3].figures
    numbers = {
        "routed_to_owner (session affinity)": own.get("routed_to_owner"),
        "routed_to_owner (KV view only, after flush)": own.get("routed_to_owner_kv_only"),
        "death_to_claim_outcome_ms": dead.get("death_to_claim_outcome_ms"),
        "after the kill (ms): process exit seen / discovery records withdrawn":
            f"{dead.get('death_seen_ms')} / {dead.get('discovery_withdrawn_ms')}",
        "claimed_reuse_ms router/direct (median)":
            f"{own.get('claimed_reuse_ms_router_median')} / "
            f"{own.get('claimed_reuse_ms_direct_median')}",
        "router_over_direct_ratio": own.get("router_over_direct_ratio"),
        "router_over_direct_paired (median of each round's ratio) / router-direct ms":
            f"{own.get('router_over_direct_paired')} / "
            f"{own.get('router_minus_direct_ms_paired')} over "
            f"{own.get('router_direct_pairs')} pairs",
        "claimed reuse split ms, router | direct (to engine / in engine / back, medians)":
            f"{_split(own.get('claimed_reuse_split_ms_router'))} | "
            f"{_split(own.get('claimed_reuse_split_ms_direct'))}",
        **{f"claim metrics {name} (before the kill)": _brief(m)
           for name, m in (result.get("worker_metrics_before_kill") or {}).items()},
        **_router_brief(router_figures(result.get("frontend_metrics_text", ""))),
    }
    # the curated row on this run's own streams: live only when every scenario held
    row = classify_row(layout.run_dir, paths, {c.claim_id: c.home for c in fleet.claims},
                       held=all(v.held for v in verdicts), sources=runtime_sources())
    return {"verdicts": [v.to_json() for v in verdicts], "numbers": numbers,
            "fleet": fleet.to_json(), "row": row.to_json(), "row_line": row.line()}


def _split(parts: dict[str, float | None] | None) -> str:
    return " / ".join(str((parts or {}).get(k)) for k in SPLIT)


def _brief(m: dict[str, float]) -> str:
    if m.get("absent"):
        return "no vllm:residentkv_* series on the worker's /metrics"
    keys = ("accepted", "rejected", "offloaded", "restored", "refused")
    return ", ".join(f"{k} {m.get(k, 0):g}" for k in keys)


def _router_brief(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "router kv events applied ok (stored/removed/cleared)":
            "/".join(f"{v:g}" for v in r["kv_events_applied_ok"].values()),
        "router predicted kv hit rate (mean over routed requests)":
            f"{r['router_kv_hit_rate_mean']} over {r['router_kv_hit_rate_count']:g}",
        "router selected/best cached prefix tokens":
            f"{r['selected_cached_prefix_tokens_total']:g}/"
            f"{r['best_eligible_cached_prefix_tokens_total']:g}",
    }


def write_outputs(out: Path, result: dict[str, Any], judged: dict[str, Any] | None) -> None:
    driver = result.get("driver")
    summary = {
        "timings_s": result["timings_s"],
        "instances": result.get("instances"),
        "requests": [s.to_json() for s in driver.sent] if driver else [],
        "withdrawals": [w.to_json() for w in result["supervisor"].withdrawals()],
        "notes": result["log"].notes if "log" in result else [],
        "worker_metrics_before_kill": result.get("worker_metrics_before_kill"),
        "worker_metrics_after_kill": result.get("worker_metrics_after_kill"),
        "router": router_figures(result.get("frontend_metrics_text", "")),
        "error": result.get("error"),
        **(judged or {}),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n",
                                      encoding="utf-8")
    (out / "frontend-metrics.txt").write_text(result.get("frontend_metrics_text", ""),
                                              encoding="utf-8")


def run(out: Path) -> int:
    if not in_private_netns():
        print("fleet: step 'namespace' failed: not in a private network namespace "
              "(run it as `unshare --net ...`, as `make fleet` does)", file=sys.stderr)
        return 1
    loopback_up()
    layout = prepare(out)
    result: dict[str, Any] = {"t0": time.monotonic(), "timings_s": {},
                              "supervisor": Supervisor(layout.discovery_dir)}
    procs: dict[str, Proc] = {}
    judged = None
    try:
        launch(layout, procs)
        with stderr_to(layout.client_log):  # the harness's own Dynamo client logs
            asyncio.run(drive(layout, procs, result))
    except StepError as exc:
        result["error"] = str(exc)
        print(f"fleet: step '{exc.step}' failed: {exc.message}", file=sys.stderr)
        if exc.detail:
            print(exc.detail, file=sys.stderr)
    except Exception as exc:  # a scenario step failed: say where, show the processes' logs
        result["error"] = f"{type(exc).__name__}: {exc}"
        print(f"fleet: step 'scenarios' failed: {result['error']}", file=sys.stderr)
        for proc in procs.values():
            print(f"--- {proc.log} (tail) ---\n{proc.tail(15)}", file=sys.stderr)
    finally:
        result["supervisor"].close()  # the graceful stop deregisters each worker itself
        left = stop_all(procs)
        result["timings_s"]["stopped"] = round(time.monotonic() - result["t0"], 1)
    if left:
        print(f"fleet: processes outlived their stop: {left}", file=sys.stderr)
        result["error"] = result.get("error") or f"processes left: {left}"
    if "log" in result and result.get("error") is None:
        judged = judge(layout, result)
    write_outputs(out, result, judged)
    if judged is None:
        return 1
    print(format_table(judged["verdicts"], judged["numbers"]))
    print(f"\nrow {judged['row_line']}")
    print(f"\nfleet: traces, logs and summary.json in {out}")
    return 0 if all(v["held"] for v in judged["verdicts"]) and judged["row"]["granted"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m residentkv.adapters.dynamo")
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="bring up the fleet, run the scenarios, judge, stop")
    r.add_argument("--out", type=Path, default=Path("fleet-out"))
    args = parser.parse_args(argv)
    return run(args.out)
