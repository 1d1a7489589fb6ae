"""Serving the extender over HTTP: the Flask application, the verbs' HTTP replies, and gunicorn with bounds.

The application — built once per process, holding the one ledger:

* :mod:`~extender.serving.app` — ``create_app(config)``, the Flask application factory: every route, and
  ``build_extender``, which wires the ledger, the cluster backend, leader election, placeholders and the
  defragmentation executor together (the composition root of the service);
* :mod:`~extender.serving.config` — the configuration of one process;
* :mod:`~extender.serving.http_verbs` — the four verbs as HTTP replies (status, ``Content-Type``, timing),
  one reply for Flask's routes and the served direct path;
* :mod:`~extender.serving.rendercache` — the operators' heavy reads rendered once for all who ask at once;
* :mod:`~extender.serving.heap` — the synced view kept out of the garbage collector's full passes.

How it is served — ``cgpu-extender serve`` runs gunicorn
(:mod:`extender.serving.application`) with exactly one worker, in its own
process (no arbiter: one process is one replica),
:class:`extender.serving.worker.ExtenderWorker`: gunicorn's own asyncio
(``asgi``) worker, whose HTTP/1.1 parsing, framing, keep-alive, ``Expect``
and TLS settings we use as they are, given what a scheduler component needs
on top (:mod:`extender.serving.protocol`, :mod:`extender.serving.budgets`,
:mod:`extender.serving.memory`, :mod:`extender.serving.tls`): connections
counted from accept and capped per port, TLS handshakes capped, deadlines for
every phase of a request, request and reply bytes budgeted across
connections, never-used and idle connections evicted first. The worker holds
the one ledger: a second worker would keep a second ledger and hand out the
same GPU memory twice. :mod:`extender.serving.asgi` is the application the
worker calls: the four scheduler verbs answered from bytes, everything else
Flask (:func:`extender.serving.app.create_app`) in thread pools of its own.

May import every room of :mod:`extender` but :mod:`extender.cli`, and Flask, gunicorn, a2wsgi
(layering: tests/test_layout.py).
"""
