"""``GET <prefix>/metrics``: the extender in the Prometheus text format, written by ``prometheus_client``.

Each application has a registry of its own (:class:`Metrics`), so tests and
several apps in one process never share series. It holds the request
duration histogram, observed per request by the app, and an
:class:`~extender.views.collectors.ExtenderCollector` that reads everything else
from the extender at scrape time. The reply's format follows the scraper's
``Accept`` header (the Prometheus text format 0.0.4 by default, OpenMetrics
when asked for).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import choose_encoder

from extender.views.collectors import ExtenderCollector

VERBS = ("filter", "prioritize", "preempt", "bind", "inspect", "plan", "defrag", "metrics", "ui", "healthz",
         "readyz")
# seconds: filter and prioritize take about a millisecond, a bind through the API server tens of them
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Metrics:
    """One application's registry: request durations plus the extender read at scrape time."""

    def __init__(self, extender):
        self.registry = CollectorRegistry(auto_describe=False)
        durations = Histogram("cgpu_request_duration_seconds", "time from reading a request to its reply, per verb",
                              ("verb",), registry=self.registry, buckets=BUCKETS)
        self._durations = {verb: durations.labels(verb) for verb in VERBS}
        self.registry.register(ExtenderCollector(extender))

    def observe(self, verb: str, seconds: float) -> None:
        """One request of ``verb`` (one of :data:`VERBS`) took ``seconds``."""
        self._durations[verb].observe(seconds)

    def content_type(self, accept: str | None) -> str:
        """The content type a scrape whose ``Accept`` header is ``accept`` gets."""
        return choose_encoder(accept or "")[1]

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """``(body, content type)`` of a scrape whose ``Accept`` header is ``accept``."""
        encode, content_type = choose_encoder(accept or "")
        return encode_by_family(encode, self.registry), content_type


class _Family:
    """A registry of one metric family (what prometheus_client's encoders read: ``collect()``)."""

    def __init__(self, families: list):
        self.families = families

    def collect(self):
        return self.families


def encode_by_family(encode, registry) -> bytes:
    """``encode(registry)``, the same bytes, written one metric family at a time.

    The library's encoders hold every sample line of the whole registry as a
    string before joining them: at 5,000 nodes ~250,000 lines, a traced peak
    of ~63 MB for a 16.7 MB page, rendered each second under a flood of
    scrapers. One family at a time holds only the encoded pieces and one
    family's lines. The OpenMetrics terminator (what ``encode`` writes for no
    family at all) is written once, at the end."""
    tail = encode(_Family([]))
    pieces = []
    for family in registry.collect():
        piece = encode(_Family([family]))
        pieces.append(piece[:len(piece) - len(tail)] if tail else piece)
    pieces.append(tail)
    return b"".join(pieces)
