"""Fixtures and helpers of the tests that run the Kubernetes backend on a fake API server (fakekube):
``kube`` (the server), ``started`` (extenders on it, stopped at teardown), :func:`connect` (a backend on it).
The conftest.py of each folder whose tests use them imports them."""

import pytest
from kubernetes import client

from extender.cluster.kube.backend import KubernetesCluster
from extender.cluster.kube.reflector import Backoff
from extender.serving.app import build_extender
from extender.serving.config import Config
from fakekube import FakeKube

FAST = Backoff(initial=0.02, maximum=0.2)


def connect(kube: FakeKube, **options) -> KubernetesCluster:
    """A backend on the fake API server, with short backoffs and watch timeouts."""
    configuration = client.Configuration()
    configuration.host = kube.url
    options = {"backoff": FAST, "watch_timeout": 5, "request_timeout": 5, **options}
    return KubernetesCluster.from_configuration(configuration, **options)


@pytest.fixture
def kube():
    server = FakeKube().start()
    yield server
    server.stop()


@pytest.fixture
def started():
    """``started(kube)`` → an Extender on a backend on ``kube``; every one is stopped at teardown."""
    made = []

    def start(kube, clock=lambda: 1_795_000_000_000_000_000, **options):
        cluster = connect(kube, **options)
        extender = build_extender(Config(), cluster=cluster, clock=clock)
        made.append(cluster)
        return extender

    yield start
    for cluster in made:
        cluster.stop()
