"""Which server to put the extender on: a JSON echo on gunicorn's worker classes, CPU per request.

Each candidate serves ``POST /echo`` — decode the JSON body (orjson, as the
extender does), answer a fixed small JSON reply — in one worker process;
the driver sends ``--requests`` requests on one keep-alive connection for
each body size (an empty pod with 10 node names, ~0.2 KB; with 5,000, ~65 KB,
the size of kube-scheduler's filter at 5,000 nodes) and prints the server's
CPU per request (its processes' threads' ``schedstat``) and the round
trip's p50 and p99. Candidates:

* ``asgi``: gunicorn's native asyncio worker (``-k asgi``), an ASGI echo
  (the extender's verbs take this path);
* ``asgi+flask``: the same worker, the echo a Flask route through a2wsgi
  (the extender's operators' routes);
* ``uvicorn``: uvicorn's gunicorn worker (``uvicorn_worker.UvicornWorker``), the ASGI echo;
* ``gevent``: ``-k gevent``, a WSGI echo, and ``gevent+flask`` the Flask route;
* ``gthread+flask``: ``-k gthread --threads 8`` (what the extender shipped before
  issue 12), the Flask route;
* with ``--old-tree DIR``, ``own``: the project's former asyncio server
  (``extender.httpserver`` of that tree, e.g. a worktree of 2a5882f), the
  echo as a direct handler answered in its loop.

``gevent`` and ``uvicorn-worker`` come with the ``bench`` extra.

    python -m benchmarks.workers [--requests 2000] [--old-tree /path/to/2a5882f]
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from benchmarks.load_kube import thread_cpu
from benchmarks.slowclients import free_port

REPLY = b'{"NodeNames":["a"],"FailedNodes":{},"Error":""}'

APPS = '''
import orjson
REPLY = %r

def wsgi_echo(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    orjson.loads(environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read())
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(REPLY)))])
    return [REPLY]

async def asgi_echo(scope, receive, send):
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    orjson.loads(b"".join(chunks))
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"%%d" %% len(REPLY))]})
    await send({"type": "http.response.body", "body": REPLY})

def flask_app():
    from flask import Flask, Response, request
    app = Flask("echo")

    @app.post("/echo")
    def echo():
        orjson.loads(request.get_data())
        return Response(REPLY, mimetype="application/json")
    return app

def asgi_flask():
    from a2wsgi import WSGIMiddleware
    return WSGIMiddleware(flask_app(), workers=2)
''' % REPLY

OWN = '''
import sys
sys.path.insert(0, %r)
import orjson
from extender.httpserver import HTTPServer
from flask import Flask
REPLY = %r

def echo(headers, body):
    orjson.loads(body)
    return 200, [(b"content-type", b"application/json")], [REPLY]

HTTPServer(Flask("echo"), "127.0.0.1", int(sys.argv[1]), direct={(b"POST", b"/echo"): echo},
           inline=lambda method, path: True).run()
'''

CANDIDATES = {  # name → gunicorn arguments (worker class, app)
    "asgi": ["-k", "asgi", "--asgi-loop", "asyncio", "--http-parser", "python", "apps:asgi_echo"],
    "asgi+flask": ["-k", "asgi", "--asgi-loop", "asyncio", "--http-parser", "python", "apps:asgi_flask()"],
    "uvicorn": ["-k", "uvicorn_worker.UvicornWorker", "apps:asgi_echo"],
    "gevent": ["-k", "gevent", "apps:wsgi_echo"],
    "gevent+flask": ["-k", "gevent", "apps:flask_app()"],
    "gthread+flask": ["-k", "gthread", "--threads", "8", "apps:flask_app()"],
}


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its descendants (gunicorn's arbiter and its worker), in nanoseconds'
    resolution (each thread's ``schedstat``: ``stat``'s 10 ms ticks are too coarse for a short run)."""
    return sum(thread_cpu(pid).values()) / 1e9


def drive(port: int, pid: int, requests: int, names: int) -> dict:
    body = orjson.dumps({"Pod": {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}}, "Nodes": None,
                         "NodeNames": [f"node-{i:05d}" for i in range(names)]})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def once():
        connection.request("POST", "/echo", body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        reply.read()
        assert reply.status == 200
        return reply

    for _ in range(200):
        once()
    before, latencies = cpu_seconds(pid), []
    for _ in range(requests):
        started = time.perf_counter()
        reply = once()
        latencies.append(time.perf_counter() - started)
    spent = cpu_seconds(pid) - before
    latencies.sort()
    return {"body_bytes": len(body), "cpu_us_per_request": round(1e6 * spent / requests),
            "p50_us": round(1e6 * latencies[len(latencies) // 2]), "p99_us": round(1e6 * latencies[int(0.99 * requests)]),
            "server": reply.getheader("Server")}


def measure(name: str, command: list, port: int, requests: int, folder: str) -> list:
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                connection.request("POST", "/echo", b"{}", {"Content-Type": "application/json"})
                connection.getresponse().read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start") from None
                time.sleep(0.2)
        return [{"candidate": name, **drive(port, process.pid, requests, names)} for names in (10, 5000)]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--old-tree", metavar="DIR", help="also measure the former server of this source tree")
    args = parser.parse_args(argv)
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "apps.py").write_text(APPS)
        rows = []
        for name in args.candidates:
            port = free_port()
            rows += measure(name, [gunicorn, "-w", "1", "-b", f"127.0.0.1:{port}", *CANDIDATES[name]], port,
                            args.requests, folder)
        if args.old_tree:
            port = free_port()
            Path(folder, "own.py").write_text(OWN % (args.old_tree, REPLY))
            rows += measure("own", [sys.executable, "own.py", str(port)], port, args.requests, folder)
    print(f"{'candidate':<15}{'body':>8}{'CPU µs/req':>12}{'p50 µs':>9}{'p99 µs':>9}  server")
    for row in rows:
        print(f"{row['candidate']:<15}{row['body_bytes']:>8}{row['cpu_us_per_request']:>12}{row['p50_us']:>9}"
              f"{row['p99_us']:>9}  {row['server']}")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
