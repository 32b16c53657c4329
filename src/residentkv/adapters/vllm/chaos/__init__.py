"""``residentkv chaos``: claims under load and faults against a running vLLM deployment.

A Jepsen-style harness at the edge, beside the witness: a **generator** plans every client's
requests from a seed (:mod:`.generator`), a **nemesis** applies a seeded fault schedule through
the control socket, ordinary requests and signals to the processes the harness started
(:mod:`.nemesis`, :mod:`.deployment`), the clients record every HTTP exchange as the official
``openai`` client saw it (:mod:`.client`, :mod:`.sessions`), and a **history checker** joins
each response to the engine's own event sink by the request's ticket and reports the figures
(:mod:`.history`, :mod:`.sink`). :mod:`.run` puts them together. Nothing here writes an event
or an outcome: what clients saw comes from real HTTP responses, what the trace says from the
real sink. docs/chaos.md describes the nemeses, attaching to a deployment and the report.
"""
