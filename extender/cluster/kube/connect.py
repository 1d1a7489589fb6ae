"""Where the Kubernetes client configuration comes from.

Order, as kubectl and client-go do it: an explicit kubeconfig file; else the
pod's service account (in-cluster); else ``$KUBECONFIG`` or ``~/.kube/config``.
:func:`available` says which of these exists without reading it, so that
``serve`` can pick the backend; :func:`load` builds the client configuration.
"""

from __future__ import annotations

import os

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class ConnectError(Exception):
    """No usable client configuration; ``str()`` says why."""


def _default_kubeconfigs() -> list:
    env = os.environ.get("KUBECONFIG")
    paths = env.split(os.pathsep) if env else [os.path.join(os.path.expanduser("~"), ".kube", "config")]
    return [p for p in paths if p and os.path.isfile(p)]


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.isfile(SERVICE_ACCOUNT_TOKEN)


def available(kubeconfig: str | None = None) -> str | None:
    """A description of the configuration :func:`load` would use, or None if there is none."""
    if kubeconfig:
        return f"kubeconfig {kubeconfig}"
    if in_cluster():
        return "in-cluster service account"
    found = _default_kubeconfigs()
    return f"kubeconfig {found[0]}" if found else None


def tried() -> str:
    """What :func:`available` looked for when it found nothing, for a one-line error."""
    env = os.environ.get("KUBECONFIG")
    files = f"$KUBECONFIG={env} (no such file)" if env else \
        f"{os.path.join(os.path.expanduser('~'), '.kube', 'config')} (no such file; $KUBECONFIG unset)"
    account = "no service account token at " + SERVICE_ACCOUNT_TOKEN if os.environ.get("KUBERNETES_SERVICE_HOST") \
        else "not in a pod ($KUBERNETES_SERVICE_HOST unset)"
    return f"no --kubeconfig, {account}, {files}"


def load(kubeconfig: str | None = None, context: str | None = None):
    """A ``kubernetes.client.Configuration`` (see module doc for the order)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if kubeconfig:
            if not os.path.isfile(kubeconfig):
                raise ConnectError(f"{kubeconfig}: no such kubeconfig file")
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
        elif in_cluster():
            config.load_incluster_config(client_configuration=configuration)
        elif _default_kubeconfigs():
            config.load_kube_config(context=context, client_configuration=configuration)
        else:
            raise ConnectError("no kubeconfig given, not running in a cluster, and no ~/.kube/config")
    except config.ConfigException as exc:
        raise ConnectError(f"cannot use the Kubernetes configuration: {exc}") from None
    return configuration
