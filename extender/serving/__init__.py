"""Serving the extender: gunicorn's arbiter and one asyncio worker, with bounds no client can exhaust.

``cgpu-extender serve`` runs gunicorn (:mod:`extender.serving.application`)
with exactly one worker, in its own process (no arbiter: one process is one
replica), :class:`extender.serving.worker.ExtenderWorker`:
gunicorn's own asyncio (``asgi``) worker, whose HTTP/1.1 parsing, framing,
keep-alive, ``Expect`` and TLS settings we use as they are, given what a
scheduler component needs on top (:mod:`extender.serving.protocol`,
:mod:`extender.serving.budgets`): connections counted from accept and capped
per port, TLS handshakes capped, deadlines for every phase of a request,
request and reply bytes budgeted across connections, never-used and idle
connections evicted first. The worker holds the one ledger: a second worker
would keep a second ledger and hand out the same GPU memory twice.

:mod:`extender.serving.asgi` is the application the worker calls: the four
scheduler verbs answered from bytes, everything else Flask
(:func:`extender.app.create_app`) in thread pools of its own.

May import: :mod:`extender` (app, config, logs, verbs), gunicorn, a2wsgi.
"""
