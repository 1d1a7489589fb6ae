"""`serve`'s leader election flags: kube-scheduler's names and defaults, Go durations, its rules; every
bad combination is one line on stderr and exit 2."""

import socket

import pytest

from extender.cli import election_flags
from extender.cli.election_flags import election_settings
from extender.cli.main import build_parser
from extender.cli.main import main


def settings(*flags):
    return election_settings(build_parser().parse_args(["serve", *flags]))


def test_kube_scheduler_defaults_and_go_durations(monkeypatch):
    monkeypatch.setenv("POD_NAMESPACE", "gpu-system")
    default = settings("--leader-elect")
    assert (default.lease_duration, default.renew_deadline, default.retry_period) == (15, 10, 2)
    assert (default.name, default.namespace, default.follow) == ("cgpu-extender", "gpu-system", False)
    issue = settings("--leader-elect", "--leader-elect-lease-duration", "8s", "--leader-elect-renew-deadline", "5s",
                     "--leader-elect-retry-period", "1s")
    assert (issue.lease_duration, issue.renew_deadline, issue.retry_period) == (8, 5, 1)
    odd = settings("--leader-elect", "--leader-elect-lease-duration", "1m30s", "--leader-elect-renew-deadline",
                   "1m0.5s", "--leader-elect-retry-period", "500ms")
    assert (odd.lease_duration, odd.renew_deadline, odd.retry_period) == (90, 60.5, 0.5)
    assert odd.lease_seconds() == 90 and settings("--leader-elect", "--leader-elect-lease-duration", "1500ms",
                                                  "--leader-elect-renew-deadline", "1s",
                                                  "--leader-elect-retry-period", "200ms").lease_seconds() == 2
    assert settings() is None  # no leader election unless asked for


def test_the_lease_namespace_is_the_pods(monkeypatch, tmp_path):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    namespace_file = tmp_path / "namespace"
    monkeypatch.setattr(election_flags, "SERVICE_ACCOUNT_NAMESPACE", str(namespace_file))
    assert settings("--leader-elect").namespace == "kube-system"  # no pod: the fallback
    namespace_file.write_text("gpu-system\n")
    assert settings("--leader-elect").namespace == "gpu-system"  # the service account's
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert settings("--leader-elect").namespace == "from-env"
    assert settings("--leader-elect", "--leader-elect-resource-namespace", "explicit").namespace == "explicit"


def test_the_identity_is_the_pod_name_and_a_unique_suffix(monkeypatch):
    monkeypatch.setenv("POD_NAME", "cgpu-extender-7d9f-x2x")
    first, second = settings("--leader-elect").identity, settings("--leader-elect").identity
    assert first.startswith("cgpu-extender-7d9f-x2x_") and second.startswith("cgpu-extender-7d9f-x2x_")
    assert first != second and len(first.split("_", 1)[1]) == 36  # a UUID
    monkeypatch.delenv("POD_NAME")
    assert settings("--leader-elect").identity.startswith(f"{socket.gethostname()}_")


def test_follow_mode_names_the_schedulers_lease():
    followed = settings("--leader-elect-follow", "--leader-elect-resource-name", "kube-scheduler",
                        "--leader-elect-resource-namespace", "kube-system")
    assert followed.follow and followed.lease == "kube-system/kube-scheduler"


@pytest.mark.parametrize("flags, message", [
    (["--leader-elect-lease-duration", "15"], "--leader-elect-lease-duration must be a duration such as 8s, 1m30s "
                                              "or 500ms, got '15'"),
    (["--leader-elect-renew-deadline", "ten seconds"], "--leader-elect-renew-deadline must be a duration"),
    (["--leader-elect-retry-period", "2S"], "--leader-elect-retry-period must be a duration"),
    (["--leader-elect-retry-period=-1s"], "--leader-elect-retry-period must be above zero, got '-1s'"),
    (["--leader-elect-lease-duration", "0s"], "--leader-elect-lease-duration must be above zero"),
    (["--leader-elect-lease-duration", "10s"], "--leader-elect-renew-deadline (10s) must be shorter than "
                                               "--leader-elect-lease-duration (10s)"),
    (["--leader-elect-retry-period", "12s"], "--leader-elect-retry-period (12s) must be shorter than "
                                             "--leader-elect-renew-deadline (10s)"),
    (["--leader-elect-resource-name", " "], "--leader-elect-resource-name must not be empty"),
    (["--demo"], "--leader-elect needs the Kubernetes backend, not --demo"),
    (["--cluster", "cluster.yaml"], "--leader-elect needs the Kubernetes backend, not --cluster"),
])
def test_a_bad_flag_is_one_line_and_exit_2(flags, message, capsys):
    assert main(["serve", "--leader-elect", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cgpu-extender: ") and message in err


def test_follow_mode_also_needs_the_kubernetes_backend(capsys):
    assert main(["serve", "--leader-elect-follow", "--demo"]) == 2
    assert capsys.readouterr().err == "cgpu-extender: --leader-elect-follow needs the Kubernetes backend, not --demo\n"


def test_leader_election_without_a_cluster_to_talk_to_is_refused(capsys, monkeypatch, tmp_path):
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    assert main(["serve", "--leader-elect"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leader election needs the Kubernetes backend" in err
