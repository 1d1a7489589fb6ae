"""Reflector.relist(): the watch is cut and a list made after the call completes; one that fails is
retried until one completes (a new leader's catch-up waits on it)."""

from builders import node, pod
from fakekube import wait_until


def test_relist_cuts_the_watch_and_lists_at_the_current_version(kube, started):
    kube.create("nodes", node("gpu-a", "cgpu", gpus=1, gib=15))
    extender = started(kube)
    wait_until(extender.ready, what="the first sync")
    pods = extender.cluster.pods
    kube.wait_watches(3)
    lists = pods.stats["lists"]
    kube.hold_watches = True  # the watch will not bring this pod: only a list can
    kube.create("pods", pod("p", mem=2, node_name="gpu-a"))
    ticket = pods.relist()
    wait_until(lambda: pods.listed_since(ticket), what="the relist")
    assert pods.stats["lists"] == lists + 1 and int(pods.resource_version) >= kube.rv
    assert "uid-p" in pods.store and pods.stats["errors"] == 0  # a cut it asked for is no error
    kube.hold_watches = False


def test_a_relist_that_fails_is_retried_until_a_list_completes(kube, started):
    extender = started(kube)
    wait_until(extender.ready, what="the first sync")
    pods = extender.cluster.pods
    real, failures = pods._lister, []

    def lister(**options):  # the next list fails, as with the API server down for a moment
        if not options.get("watch") and not failures:
            failures.append(options)
            raise ConnectionRefusedError("connection refused")
        return real(**options)

    pods._lister = lister
    lists = pods.stats["lists"]
    ticket = pods.relist()
    wait_until(lambda: pods.listed_since(ticket), what="the relist to be retried")
    assert failures and pods.stats["lists"] == lists + 1 and pods.stats["errors"] == 1
