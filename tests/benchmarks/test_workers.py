"""benchmarks.workers runs a candidate end to end and reads its CPU per request."""

import json

from benchmarks import workers


def test_the_asgi_candidate_is_measured_for_both_body_sizes(capsys):
    assert workers.main(["--requests", "30", "--candidates", "asgi"]) == 0
    rows = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [(r["candidate"], r["body_bytes"] > 60_000) for r in rows] == [("asgi", False), ("asgi", True)]
    assert all(r["cpu_us_per_request"] > 0 and r["p99_us"] >= r["p50_us"] > 0 for r in rows)
    assert {r["server"] for r in rows} == {"gunicorn/asgi"}
