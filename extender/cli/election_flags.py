"""``serve``'s leader election flags: kube-scheduler's names, defaults and rules.

``--leader-elect`` campaigns for a Lease (:mod:`extender.cluster.kube.election`);
``--leader-elect-follow`` follows one instead (the sidecar variant:
:mod:`extender.cluster.kube.follow`). Durations are Go durations (``8s``, ``1m30s``,
``500ms``; parsed by ``durationpy``, which follows Go's ``time.ParseDuration``)
and must be above zero, with retry period < renew deadline < lease duration
(kube-scheduler's validation; client-go also wants the renew deadline above 1.2
retry periods for its jitter, which our loop does not add). The Lease's
namespace defaults to the pod's (``POD_NAMESPACE``, else the service account's
namespace file, else ``kube-system``); the identity is the pod's name
(``POD_NAME``, else the host name) plus ``_`` and a UUID, as kube-scheduler
makes its ``hostname_uuid``.

Imports: :mod:`extender.cluster.leadership` only (and ``durationpy``).
"""

from __future__ import annotations

import argparse
import os
import socket
import uuid

import durationpy

from extender.cluster.leadership import ElectionSettings

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DURATIONS = (("lease_duration", "leader_elect_lease_duration"), ("renew_deadline", "leader_elect_renew_deadline"),
             ("retry_period", "leader_elect_retry_period"))  # ElectionSettings field, argparse dest


class FlagError(ValueError):
    """A leader election flag that cannot be used; ``str()`` is the one-line message."""


def add_leader_election_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("leader election (several replicas, one answering: docs/high-availability.md)")
    group.add_argument("--leader-elect", action="store_true",
                       help="Kubernetes backend: campaign for a coordination.k8s.io Lease; only its holder answers "
                            "filter, prioritize, preempt and bind and is ready, the others stand by, synced")
    group.add_argument("--leader-elect-follow", action="store_true",
                       help="do not campaign: answer only while this host's kube-scheduler holds the named Lease "
                            "(the extender as a sidecar of kube-scheduler: kube-scheduler / kube-system)")
    group.add_argument("--leader-elect-lease-duration", default="15s", metavar="DURATION",
                       help="how long a candidate waits after the Lease last changed before taking it (default 15s)")
    group.add_argument("--leader-elect-renew-deadline", default="10s", metavar="DURATION",
                       help="the leader stops answering this long after it sent its last successful renewal "
                            "(default 10s)")
    group.add_argument("--leader-elect-retry-period", default="2s", metavar="DURATION",
                       help="time between tries to take, renew or read the Lease (default 2s)")
    group.add_argument("--leader-elect-resource-name", default="cgpu-extender", metavar="NAME",
                       help="the Lease's name (default cgpu-extender)")
    group.add_argument("--leader-elect-resource-namespace", default=None, metavar="NS",
                       help="the Lease's namespace (default: the pod's: $POD_NAMESPACE, else the service "
                            "account's, else kube-system)")


def parse_duration(flag: str, text: str) -> float:
    """Seconds of a Go duration above zero; :class:`FlagError` otherwise."""
    try:
        seconds = durationpy.from_str(text).total_seconds()
    except Exception:  # noqa: BLE001 - durationpy raises its own error type and others on odd input
        raise FlagError(f"{flag} must be a duration such as 8s, 1m30s or 500ms, got {text!r}") from None
    if seconds <= 0:
        raise FlagError(f"{flag} must be above zero, got {text!r}")
    return seconds


def default_namespace() -> str:
    namespace = os.environ.get("POD_NAMESPACE", "").strip()
    if namespace:
        return namespace
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as f:
            namespace = f.read().strip()
    except OSError:
        namespace = ""
    return namespace or "kube-system"


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME', '').strip() or socket.gethostname()}_{uuid.uuid4()}"


def election_settings(args: argparse.Namespace) -> ElectionSettings | None:
    """The settings the flags ask for (None without ``--leader-elect``/``--leader-elect-follow``);
    :class:`FlagError` for flags that cannot be used."""
    seconds = {field: parse_duration("--" + dest.replace("_", "-"), getattr(args, dest)) for field, dest in DURATIONS}
    if seconds["renew_deadline"] >= seconds["lease_duration"]:
        raise FlagError(f"--leader-elect-renew-deadline ({args.leader_elect_renew_deadline}) must be shorter than "
                        f"--leader-elect-lease-duration ({args.leader_elect_lease_duration})")
    if seconds["retry_period"] >= seconds["renew_deadline"]:
        raise FlagError(f"--leader-elect-retry-period ({args.leader_elect_retry_period}) must be shorter than "
                        f"--leader-elect-renew-deadline ({args.leader_elect_renew_deadline})")
    name = args.leader_elect_resource_name.strip()
    if not name:
        raise FlagError("--leader-elect-resource-name must not be empty")
    if not (args.leader_elect or args.leader_elect_follow):
        return None
    namespace = (args.leader_elect_resource_namespace or "").strip() or default_namespace()
    return ElectionSettings(name=name, namespace=namespace, identity=default_identity(),
                            follow=args.leader_elect_follow, **seconds)
