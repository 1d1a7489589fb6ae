"""manifests/: standard kinds against the Kubernetes schemas (kubernetes-validate, strict), the
KubeSchedulerConfigurations against the field rules of kube-scheduler's extender config,
and the deployment choices (least-privilege RBAC, single replica, hardening, probes)."""

import re
from pathlib import Path
from urllib.parse import urlparse

import kubernetes_validate
import pytest
import yaml

from extender.cli import build_parser
from policy.names import MODE_CORE
from policy.node import parse_node
from policy.request import parse_pod_request

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
FILES = sorted(MANIFESTS.rglob("*.yaml"))
SCHEDULER_KIND = "KubeSchedulerConfiguration"
MANAGED = {"aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage"}
# Default score plugins and their weights (protocol reference): each adds up to 100 x weight.
DEFAULT_PLUGIN_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2,
                          "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}

# Fields kube-scheduler decodes (strictly) in kubescheduler.config.k8s.io/v1 and v1beta3.
CONFIG_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "percentageOfNodesToScore",
                 "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders", "enableProfiling",
                 "enableContentionProfiling", "delayCacheUntilActive"}
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
                   "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}
LEADER_FIELDS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
                 "resourceNamespace"}
CLIENT_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
PLACEHOLDERS = "manifests/autoscaling/"  # scale-up placeholders
OPT_IN = (PLACEHOLDERS, "manifests/defrag/")  # extra RBAC only for those who apply it
# Kinds of CRDs (the Prometheus Operator's): no built-in schema; tests/manifests/test_monitoring.py checks them.
CUSTOM_API_GROUPS = ("monitoring.coreos.com/",)
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


def documents(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


ALL = [(path.relative_to(ROOT).as_posix(), doc) for path in FILES for doc in documents(path)]


def find(kind: str, name: str) -> dict:
    return next(d for _, d in ALL if d["kind"] == kind and d["metadata"]["name"] == name)


def scheduler_configs() -> list:
    configs = [(where, doc) for where, doc in ALL if doc["kind"] == SCHEDULER_KIND]
    for where, doc in ALL:
        if doc["kind"] == "ConfigMap":
            for key, text in (doc.get("data") or {}).items():
                embedded = yaml.safe_load(text)
                if isinstance(embedded, dict) and embedded.get("kind") == SCHEDULER_KIND:
                    configs.append((f"{where}:{doc['metadata']['name']}/{key}", embedded))
    return configs


def test_every_manifest_file_is_covered():
    assert {where for where, _ in ALL} == {p.relative_to(ROOT).as_posix() for p in FILES}
    assert len(scheduler_configs()) >= 4


@pytest.mark.parametrize("version", ["1.28", "1.33"])
def test_standard_kinds_validate_against_the_kubernetes_schemas(version):
    checked = 0
    for where, doc in ALL:
        if doc["kind"] == SCHEDULER_KIND or doc["apiVersion"].startswith(CUSTOM_API_GROUPS):
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{where} {doc['kind']}/{doc['metadata']['name']}: {exc.message}")
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("where,config", scheduler_configs(), ids=lambda v: v if isinstance(v, str) else "")
def test_scheduler_configuration_follows_the_extender_rules(where, config):
    assert config["apiVersion"] in ("kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3")
    assert set(config) <= CONFIG_FIELDS, f"unknown fields (strict decoding rejects them): {set(config) - CONFIG_FIELDS}"
    assert set(config.get("leaderElection") or {}) <= LEADER_FIELDS
    assert set(config.get("clientConnection") or {}) <= CLIENT_FIELDS
    for profile in config.get("profiles") or []:
        assert set(profile) <= PROFILE_FIELDS
    assert config["percentageOfNodesToScore"] == 100
    extenders = config["extenders"]
    assert sum(1 for e in extenders if e.get("bindVerb")) == 1, "exactly one extender binds"
    names = [r["name"] for e in extenders for r in e.get("managedResources") or []]
    assert len(names) == len(set(names)), "managed resources are unique across extenders"
    (extender,) = extenders
    assert set(extender) <= EXTENDER_FIELDS, set(extender) - EXTENDER_FIELDS
    url = urlparse(extender["urlPrefix"])
    assert url.port and url.path == "/cgpu-scheduler"
    assert (url.scheme == "https") == extender["enableHTTPS"] is ("tlsConfig" in extender)
    if extender["enableHTTPS"]:  # mutual TLS: kube-scheduler's client certificate, the CA of the extender's
        assert set(extender["tlsConfig"]) == {"certFile", "keyFile", "caFile"}
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["bindVerb"]) == ("filter", "prioritize",
                                                                                          "bind")
    assert extender["preemptVerb"] == "preempt"  # kube-scheduler's preemption frees room by node totals only
    assert isinstance(extender["weight"], int) and extender["weight"] > 0
    # one extender point (score 1 of 10) outweighs every default score plugin together
    assert extender["weight"] * 10 > 100 * sum(DEFAULT_PLUGIN_WEIGHTS.values())
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is False
    assert GO_DURATION.match(extender["httpTimeout"])
    if where.startswith("manifests/fragmentation/"):  # every pod through the extender: no managedResources
        assert "managedResources" not in extender
        deployment = next(d for d in documents(MANIFESTS / "fragmentation" / "extender.yaml")
                          if d["kind"] == "Deployment")
        args = build_parser().parse_args(containers_of(deployment)["cgpu-extender"]["args"])
        assert args.score_all_pods and args.scoring == "fragmentation"
    else:
        assert {r["name"]: r["ignoredByScheduler"] for r in extender["managedResources"]} == \
            dict.fromkeys(MANAGED, False)


def test_the_v1beta3_copy_differs_only_in_its_api_version():
    v1 = yaml.safe_load((MANIFESTS / "scheduler-config.yaml").read_text())
    beta = yaml.safe_load((MANIFESTS / "scheduler-config-v1beta3.yaml").read_text())
    assert beta.pop("apiVersion") == "kubescheduler.config.k8s.io/v1beta3"
    v1.pop("apiVersion")
    assert beta == v1


def test_rbac_grants_exactly_what_the_extender_uses():
    role = find("ClusterRole", "cgpu-extender")
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == {("", "nodes", v) for v in ("get", "list", "watch")} | \
        {("", "pods", v) for v in ("get", "list", "watch", "patch")} | {("", "pods/binding", "create")} | \
        {("", "events", "create")} | {("policy", "poddisruptionbudgets", "list")}
    configmaps = find("Role", "cgpu-extender-unhealthy-gpus")
    assert configmaps["metadata"]["namespace"] == "kube-system"
    assert configmaps["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    for _, doc in ALL:
        for rule in doc.get("rules") or []:
            assert "*" not in rule["verbs"] + rule["resources"] and "secrets" not in rule["resources"]


def containers_of(deployment: dict) -> dict:
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}


@pytest.mark.parametrize("name", ["cgpu-extender", "cgpu-scheduler"])
def test_deployments_run_one_hardened_replica(name):
    deployment = find("Deployment", name)
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod_spec = spec["template"]["spec"]
    assert pod_spec["securityContext"]["runAsNonRoot"] is True and pod_spec["securityContext"]["runAsUser"] > 0
    for container in pod_spec["containers"]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind])
        assert container["livenessProbe"] and container["readinessProbe"]
    extender = containers_of(deployment)["cgpu-extender"]
    args = build_parser().parse_args(extender["args"])  # the flags exist and parse
    assert args.command == "serve"
    assert {v["name"] for v in pod_spec["volumes"] if "emptyDir" in v} == {"tmp"}
    assert any(m["mountPath"] == "/tmp" for m in extender["volumeMounts"])
    for probe, route in (("livenessProbe", "healthz"), ("readinessProbe", "readyz")):
        action = extender[probe]
        target = action["httpGet"]["path"] if "httpGet" in action else " ".join(action["exec"]["command"])
        assert f"{args.prefix}/{route}" in target


def test_deployment_variant_serves_the_service_its_scheduler_config_calls():
    deployment, service = find("Deployment", "cgpu-extender"), find("Service", "cgpu-extender")
    args = build_parser().parse_args(containers_of(deployment)["cgpu-extender"]["args"])
    assert args.host == "0.0.0.0"
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    config = yaml.safe_load((MANIFESTS / "deployment" / "scheduler-config.yaml").read_text())
    url = urlparse(config["extenders"][0]["urlPrefix"])
    assert url.hostname.startswith(f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc")
    assert url.port == service["spec"]["ports"][0]["port"] == args.port and url.path == args.prefix
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "cgpu-extender"


def test_sidecar_variant_listens_on_loopback_as_a_second_scheduler():
    deployment = find("Deployment", "cgpu-scheduler")
    containers = containers_of(deployment)
    args = build_parser().parse_args(containers["cgpu-extender"]["args"])
    assert args.host == "127.0.0.1" and "ports" not in containers["cgpu-extender"]
    (where, config), = [(w, c) for w, c in scheduler_configs() if "cgpu-scheduler-config" in w]
    assert [p["schedulerName"] for p in config["profiles"]] == ["cgpu-scheduler"]
    url = urlparse(config["extenders"][0]["urlPrefix"])
    assert (url.hostname, url.port, url.path) == ("127.0.0.1", args.port, args.prefix)
    assert "--config=/etc/cgpu-scheduler/config.yaml" in containers["kube-scheduler"]["command"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    bound = {(d["roleRef"]["kind"], d["roleRef"]["name"]) for where, d in ALL
             if d["kind"] in ("ClusterRoleBinding", "RoleBinding") and not where.startswith(OPT_IN) and
             any(s["name"] == account for s in d["subjects"])}
    assert bound == {("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler"),
                     ("Role", "extension-apiserver-authentication-reader"), ("ClusterRole", "cgpu-extender"),
                     ("Role", "cgpu-extender-unhealthy-gpus")}


def pod_of(workload: dict) -> dict:
    template = workload["spec"]["template"]
    return {"metadata": {"name": workload["metadata"]["name"], **template.get("metadata", {})},
            "spec": template["spec"]}


def test_examples_ask_for_what_the_seeds_say():
    job = parse_pod_request(pod_of(find("Job", "cuda-sample")))
    assert (job.memory, job.core) == (2, 30)
    binpack = parse_pod_request(pod_of(find("Deployment", "binpack-demo")))
    assert (binpack.memory, binpack.wants_core) == (3, False)
    node = find("Node", "gpu-a10-node-1")
    spec = parse_node(node)
    assert spec.mode == MODE_CORE and spec.problem is None and (spec.gpu_count, spec.memory_per_gpu) == (1, 22)
    assert node["metadata"]["labels"]["gpu-spec"] == "NVIDIA-A10"
    assert node["spec"]["taints"] == [{"key": "scaler", "value": "gpu", "effect": "NoSchedule"}]
    for workload in (find("Job", "cuda-sample"), find("Deployment", "binpack-demo")):
        spec = workload["spec"]["template"]["spec"]
        assert {"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]


def test_placeholder_variant_grants_pod_writes_in_its_own_namespace_only():
    from extender.config import Config

    defaults = Config()
    variant = [d for where, d in ALL if where.startswith(PLACEHOLDERS)]
    (namespace,) = [d for d in variant if d["kind"] == "Namespace"]
    (role,) = [d for d in variant if d["kind"] == "Role"]
    (binding,) = [d for d in variant if d["kind"] == "RoleBinding"]
    (priority,) = [d for d in variant if d["kind"] == "PriorityClass"]
    assert namespace["metadata"]["name"] == role["metadata"]["namespace"] == binding["metadata"]["namespace"] == \
        defaults.placeholder_namespace
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert {(s["name"], s["namespace"]) for s in binding["subjects"]} == {
        (find("Deployment", name)["spec"]["template"]["spec"]["serviceAccountName"], "kube-system")
        for name in ("cgpu-extender", "cgpu-scheduler")}
    # below every pod without a PriorityClass (0), not below cluster-autoscaler's default expendable cutoff (-10)
    assert priority["metadata"]["name"] == defaults.placeholder_priority_class
    assert -10 <= priority["value"] < 0 and priority["globalDefault"] is False


def test_defrag_variant_grants_evictions_only():
    variant = [d for where, d in ALL if where.startswith("manifests/defrag/")]
    (role,) = [d for d in variant if d["kind"] == "ClusterRole"]
    (binding,) = [d for d in variant if d["kind"] == "ClusterRoleBinding"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert {(s["name"], s["namespace"]) for s in binding["subjects"]} == {
        (find("Deployment", name)["spec"]["template"]["spec"]["serviceAccountName"], "kube-system")
        for name in ("cgpu-extender", "cgpu-scheduler")}


def test_tls_variant_serves_https_to_client_certificates_and_probes_on_a_plain_port():
    docs = documents(MANIFESTS / "tls" / "extender.yaml")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    service = next(d for d in docs if d["kind"] == "Service")
    container = containers_of(deployment)["cgpu-extender"]
    args = build_parser().parse_args(container["args"])
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for path in (args.tls_cert, args.tls_key, args.client_ca):
        assert path.startswith(mounts["tls"] + "/")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "cgpu-extender-tls"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": args.port, "probes": args.probe_port}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "probes" and "scheme" not in container[probe]["httpGet"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == args.probe_port
    config = yaml.safe_load((MANIFESTS / "tls" / "scheduler-config.yaml").read_text())
    url = urlparse(config["extenders"][0]["urlPrefix"])
    assert url.scheme == "https" and url.port == service["spec"]["ports"][0]["port"] == args.port
    policy = yaml.safe_load((MANIFESTS / "tls" / "networkpolicy.yaml").read_text())
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= deployment["spec"]["template"]["metadata"][
        "labels"].items()
    verbs, probes = policy["spec"]["ingress"]
    assert verbs["from"] and [p["port"] for p in verbs["ports"]] == [args.port]
    assert "from" not in probes and [p["port"] for p in probes["ports"]] == [args.probe_port]
