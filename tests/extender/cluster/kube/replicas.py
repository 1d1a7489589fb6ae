"""Replicas of the extender with leader election, in this process, on the fake API server.

Each replica is the real thing — its own backend (watches, binds), its own
election thread, the Flask app — only in a thread of this process; durations
are short (lease 1 s, renew deadline 0.6 s, retry period 0.2 s).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace

import orjson

from extender.cluster.leadership import ElectionSettings
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from fakekube import wait_until
from kubefixtures import connect

FAST = ElectionSettings(lease_duration=1.0, renew_deadline=0.6, retry_period=0.2, name="cgpu-extender",
                        namespace="kube-system")
PREFIX = "/cgpu-scheduler"


class Replica:
    def __init__(self, kube, name: str, settings: ElectionSettings = FAST):
        self.identity = settings.identity or f"{name}_{uuid.uuid4()}"
        self.cluster = connect(kube)
        self.config = Config(leader_election=replace(settings, identity=self.identity))
        self.extender = build_extender(self.config, cluster=self.cluster, clock=lambda: 1_795_000_000_000_000_000)
        self.app = create_app(self.config, extender=self.extender)
        self.client = self.app.test_client()
        self.stopped = False
        self._stalls: list = []

    @property
    def leadership(self):
        return self.extender.leadership

    def role(self) -> str:
        return self.leadership.status()["role"]

    def serving(self) -> bool:
        return self.extender.serving()

    def post(self, verb: str, payload: dict) -> tuple[int, object]:
        reply = self.client.post(f"{PREFIX}/{verb}", data=orjson.dumps(payload), content_type="application/json")
        return reply.status_code, reply.get_json()

    def get(self, route: str) -> tuple[int, object]:
        reply = self.client.get(f"{PREFIX}/{route}")
        return reply.status_code, reply.get_json() if reply.is_json else reply.get_data(as_text=True)

    def filter(self, pod: dict, nodes: list) -> tuple[int, dict]:
        return self.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes})

    def bind(self, pod: dict, node: str) -> tuple[int, dict]:
        meta = pod["metadata"]
        return self.post("bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                  "PodUID": meta["uid"], "Node": node})

    @property
    def loop(self):
        """The replica's election loop (an Elector or a Follower): what its backend stops with it."""
        from extender.cluster.kube.election import Elector
        from extender.cluster.kube.follow import Follower

        return next(cb.__self__ for cb in self.cluster._on_stop if isinstance(getattr(cb, "__self__", None),
                                                                              (Elector, Follower)))

    def stall_renewals(self) -> threading.Event:
        """From now on the election thread hangs in its next Lease write until the returned event is set
        (a thread starved, a request that never returns): only the clock can stop this leader."""
        release = threading.Event()
        leases = self.loop.leases
        real = leases.replace

        def stalled(*args, **kwargs):
            release.wait()
            return real(*args, **kwargs)

        leases.replace = stalled
        self._stalls.append(release)
        return release

    def stop(self) -> None:
        for release in self._stalls:
            release.set()
        if not self.stopped:
            self.stopped = True
            self.cluster.stop()


def leader_of(replicas, timeout: float = 15.0) -> "Replica":
    """The one replica serving, once exactly one is (fails after ``timeout``)."""
    def one():
        serving = [r for r in replicas if not r.stopped and r.serving()]
        return serving[0] if len(serving) == 1 else None
    return wait_until(one, timeout=timeout, what="exactly one replica to lead")


class Overlap:
    """Samples, every few milliseconds in a thread, whether two replicas serve at once."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.both = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Overlap":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            serving = sum(1 for r in self.replicas if not r.stopped and r.serving())
            self.samples += 1
            self.both += serving > 1
            time.sleep(0.002)
