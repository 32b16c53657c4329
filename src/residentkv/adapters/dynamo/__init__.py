"""The fleet bring-up: two vLLM replicas with ``ResidentClaimConnector`` behind NVIDIA Dynamo's
KV router, the fleet scenarios, and their judgement from the replicas' own traces.

The modules here import neither torch, vLLM nor Dynamo at import time (but ``worker_main``, the
worker processes' entry point): Dynamo and vLLM live in their own venv (``.venv-fleet``) and run
as subprocesses; ``run`` is the one entry point that ``make fleet`` calls, inside a private
network namespace.

- :mod:`.layout`       the fleet's files, ports and command lines (pure)
- :mod:`.tokenizer`    a tiny word-level tokenizer for the frontend (no hub)
- :mod:`.standins`     the minimal stand-ins Dynamo 1.6.1 needs beside vLLM 0.32
- :mod:`.worker_main`  ``dynamo.vllm`` with those stand-ins installed
- :mod:`.procs`        process launch, readiness waits, stop by PID
- :mod:`.discovery`    Dynamo's file discovery: instance ids, a worker's records, withdrawal
- :mod:`.supervisor`   withdraws a worker's discovery records when its process exits
- :mod:`.httpclient`   one kept-alive HTTP connection to the frontend, one-off posts
- :mod:`.driver`       requests through the router, straight to a worker, flush, kill
- :mod:`.scenarios`    the fleet scenarios, as requests
- :mod:`.tracefacts`   which traced request answered which sent request (pure)
- :mod:`.verdicts`     each scenario's verdict, from the traces (pure)
- :mod:`.judging`      the fleet view and the ``observation`` gate
- :mod:`.promtext`, :mod:`.summary`  Prometheus parsing, the numbers and the table (pure)
- :mod:`.run`          the run, end to end (``python -m residentkv.adapters.dynamo run``)

See docs/fleet.md.
"""
