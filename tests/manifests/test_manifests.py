"""manifests/: every overlay rendered by kustomize (tests/manifests/rendered.py) — standard kinds
against the Kubernetes 1.32 schemas (kubernetes-validate, strict), one workload each and no stray
objects, the image set in one place, hardened pod specs, least-privilege RBAC per variant, the
KubeSchedulerConfigurations against the field rules of kube-scheduler's extender config, and each
variant's wiring (Service, TLS, sidecar, ha, fragmentation, examples)."""

import configparser
import re
from pathlib import Path
from urllib.parse import urlparse

import kubernetes_validate
import pytest
import yaml

from extender.cluster.embedded import EmbeddedCluster
from policy.names import MODE_CORE
from policy.node import parse_node
from policy.request import parse_pod_request
from rendered import (COMBOS, COMPONENTS, CONTROL_PLANE_CONFIG, DEFAULT_CONFIG, MANIFESTS, OVERLAYS, ROOT, containers_of,
                      every_rendering, extender_containers, find, kubectls, pod_spec, read_yaml, render, render_combo,
                      scheduler_configs, serve_args, workloads)

SCHEDULER_KIND = "KubeSchedulerConfiguration"
MANAGED = {"aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage"}
# Default score plugins and their weights (protocol reference): each adds up to 100 x weight.
DEFAULT_PLUGIN_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2,
                          "NodeResourcesFit": 1, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
# Fields kube-scheduler decodes (strictly) in kubescheduler.config.k8s.io/v1.
CONFIG_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "percentageOfNodesToScore",
                 "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders", "enableProfiling",
                 "enableContentionProfiling", "delayCacheUntilActive"}
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
                   "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}
LEADER_FIELDS = {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock", "resourceName",
                 "resourceNamespace"}
CLIENT_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
PROFILE_FIELDS = {"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}
# Kinds of CRDs (the Prometheus Operator's): no built-in schema; tests/manifests/test_monitoring.py checks them.
CUSTOM_API_GROUPS = ("monitoring.coreos.com/",)
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
SERVICE_BACKED = ("default", "tls", "ha", "monitoring", "autoscaling")
SECOND_SCHEDULER = ("sidecar", "fragmentation")
ACCOUNT = ("cgpu-extender", "kube-system")

RENDERINGS = every_rendering()
NAMES = [name for name, _ in RENDERINGS]


def documents(path: Path) -> list:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_overlays_and_components_are_the_supported_shapes():
    assert OVERLAYS == sorted(["default", "tls", "ha", "sidecar", "fragmentation", "monitoring", "autoscaling"])
    assert COMPONENTS == sorted(["tls", "ha", "monitoring", "autoscaling", "defrag"])
    assert set(CONTROL_PLANE_CONFIG) == set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_kubectl_renders_every_overlay_the_same(overlay):
    renderings = [render(overlay, kubectl) for kubectl in kubectls()]
    assert renderings[0] and all(r == renderings[0] for r in renderings)


@pytest.mark.parametrize("version", ["1.32", "1.37"])
@pytest.mark.parametrize("name,objects", RENDERINGS, ids=NAMES)
def test_rendered_objects_validate_against_the_kubernetes_schemas(name, objects, version):
    checked = 0
    for doc in objects:
        if doc["apiVersion"].startswith(CUSTOM_API_GROUPS):
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name}: {doc['kind']}/{doc['metadata']['name']}: {exc.message}")
        checked += 1
    assert checked >= 7


@pytest.mark.parametrize("name,objects", RENDERINGS, ids=NAMES)
def test_one_apply_creates_one_extender_workload_and_nothing_stray(name, objects):
    assert [d["kind"] for d in workloads(objects)] == ["Deployment"]
    assert len(extender_containers(objects)) == 1
    assert not [d for d in objects if d["kind"] in ("Node", "Job", "HorizontalPodAutoscaler")], \
        "examples are in no overlay"
    keys = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in objects]
    assert len(keys) == len(set(keys))


def test_no_kustomization_takes_an_example():
    for kustomization in MANIFESTS.rglob("kustomization.yaml"):
        text = kustomization.read_text()
        assert "examples" not in text, kustomization


def package_version() -> str:
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    return setup["metadata"]["version"]


def test_the_image_is_set_in_one_place():
    (image,) = read_yaml("manifests/base/kustomization.yaml")["images"]
    assert image["name"] == "cgpu-extender" and image["newTag"] == package_version()
    # no manifest names a tag or registry of the extender's image but that entry
    for path in MANIFESTS.rglob("*.yaml"):
        for line in path.read_text().splitlines():
            assert not re.search(r"image:\s*\S*cgpu-extender:", line), f"{path}: {line}"
    for name, objects in RENDERINGS:
        (workload, container), = extender_containers(objects)
        assert container["image"] == f"{image['newName']}:{image['newTag']}", name


@pytest.mark.parametrize("name,objects", RENDERINGS, ids=NAMES)
def test_every_container_is_hardened_and_the_extender_probed(name, objects):
    (workload, extender), = extender_containers(objects)
    spec = pod_spec(workload)
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] > 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["serviceAccountName"] == ACCOUNT[0] and workload["metadata"]["namespace"] == ACCOUNT[1]
    for container in spec["containers"]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind])
        assert container["livenessProbe"] and container["readinessProbe"]
    args = serve_args(extender)
    volumes = {v["name"]: v for v in spec["volumes"]}
    (tmp,) = [m for m in extender["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[tmp["name"]]
    for probe, route in (("livenessProbe", "healthz"), ("readinessProbe", "readyz")):
        action = extender[probe]
        target = action["httpGet"]["path"] if "httpGet" in action else " ".join(action["exec"]["command"])
        assert f"{args.prefix}/{route}" in target


@pytest.mark.parametrize("name,objects", RENDERINGS, ids=NAMES)
def test_the_extender_listens_where_its_probes_and_service_reach(name, objects):
    (workload, container), = extender_containers(objects)
    args = serve_args(container)
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    if args.host == "127.0.0.1":  # the second scheduler's pod: nothing outside it reaches the extender
        assert not ports and not [d for d in objects if d["kind"] == "Service"]
        assert all("exec" in container[p] for p in ("livenessProbe", "readinessProbe"))
        return
    assert args.host == "0.0.0.0"
    # `http` is the plain port of every Service-backed variant: probes and metrics
    assert ports["http"] == (args.probe_port or args.port)
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "http" and "scheme" not in container[probe]["httpGet"]
    service = find(objects, "Service", "cgpu-extender")
    assert service["spec"]["selector"].items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} == set(ports)
    annotations = workload["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == ports["http"]
    assert annotations["prometheus.io/path"] == f"{args.prefix}/metrics"


# -- RBAC ----------------------------------------------------------------------------------------

BASE_GRANTS = {(None, "", "nodes", v, None) for v in ("get", "list", "watch")} | \
    {(None, "", "pods", v, None) for v in ("get", "list", "watch", "patch")} | \
    {(None, "", "pods/binding", "create", None), (None, "", "events", "create", None),
     (None, "policy", "poddisruptionbudgets", "list", None)} | \
    {("kube-system", "", "configmaps", v, None) for v in ("get", "list", "watch")}
LEASE = "coordination.k8s.io"
EXTRA_GRANTS = {
    "ha": {("kube-system", LEASE, "leases", "create", None), ("kube-system", LEASE, "leases", "get", "cgpu-extender"),
           ("kube-system", LEASE, "leases", "update", "cgpu-extender")},
    "second scheduler": {("kube-system", LEASE, "leases", "get", "cgpu-scheduler"),
                         ("kube-system", LEASE, "leases", "update", "cgpu-scheduler")},
    "autoscaling": {("cgpu-placeholders", "", "pods", "create", None), ("cgpu-placeholders", "", "pods", "delete", None)},
    "defrag": {(None, "", "pods/eviction", "create", None)},
}
# kube-scheduler's own roles, bound to the second scheduler's pod account (built in: not in the manifests)
SCHEDULER_ROLES = {("ClusterRole", "system:kube-scheduler"), ("ClusterRole", "system:volume-scheduler"),
                   ("Role", "extension-apiserver-authentication-reader")}


def grants(objects: list) -> tuple:
    """(namespace, group, resource, verb, resourceName) granted to the extender's account by the
    manifests' own roles, and the built-in roles bound to it."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in objects
             if d["kind"] in ("ClusterRole", "Role")}
    granted, builtin = set(), set()
    for binding in (d for d in objects if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if not any((s["name"], s.get("namespace")) == ACCOUNT for s in binding["subjects"]):
            continue
        namespace = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        if role is None:
            builtin.add((ref["kind"], ref["name"]))
            continue
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [None]:
                            granted.add((namespace, group, resource, verb, name))
    return granted, builtin


def expected_grants(name: str) -> tuple:
    parts = set(name.split("+"))
    granted, builtin = set(BASE_GRANTS), set()
    if parts & {"ha"}:
        granted |= EXTRA_GRANTS["ha"]
    if parts & set(SECOND_SCHEDULER):
        granted |= EXTRA_GRANTS["second scheduler"]
        builtin |= SCHEDULER_ROLES
    for extra in ("autoscaling", "defrag"):
        if extra in parts:
            granted |= EXTRA_GRANTS[extra]
    return granted, builtin


@pytest.mark.parametrize("name,objects", RENDERINGS, ids=NAMES)
def test_rbac_grants_exactly_what_the_variant_uses(name, objects):
    assert grants(objects) == expected_grants(name)
    for doc in objects:
        for rule in doc.get("rules") or []:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
            assert "secrets" not in rule["resources"]


# -- kube-scheduler configurations ---------------------------------------------------------------

def all_scheduler_configs() -> list:
    configs = [(f"{path}", read_yaml(path)) for path in sorted({p for p in CONTROL_PLANE_CONFIG.values() if p})]
    for name, objects in RENDERINGS:
        configs += [(f"{name}:{where}", config) for where, config in scheduler_configs(objects)]
    return configs


CONFIGS = all_scheduler_configs()


def test_every_scheduler_configuration_file_belongs_to_a_shipped_variant():
    files = {p.relative_to(ROOT).as_posix() for p in MANIFESTS.rglob("*.yaml")
             if any(isinstance(d, dict) and d.get("kind") == SCHEDULER_KIND for d in documents(p))}
    embedded = {f"manifests/overlays/{o}/scheduler-config.yaml" for o in SECOND_SCHEDULER}
    used = {p for p in CONTROL_PLANE_CONFIG.values() if p} | embedded
    assert files == used
    for overlay in SECOND_SCHEDULER:  # the file is what the overlay's ConfigMap holds
        ((_, config),) = scheduler_configs(render(overlay))
        assert config == read_yaml(f"manifests/overlays/{overlay}/scheduler-config.yaml")


@pytest.mark.parametrize("where,config", CONFIGS, ids=[w for w, _ in CONFIGS])
def test_scheduler_configuration_follows_the_extender_rules(where, config):
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert set(config) <= CONFIG_FIELDS, f"unknown fields (strict decoding rejects them): {set(config) - CONFIG_FIELDS}"
    assert set(config.get("leaderElection") or {}) <= LEADER_FIELDS
    assert set(config.get("clientConnection") or {}) <= CLIENT_FIELDS
    for profile in config.get("profiles") or []:
        assert set(profile) <= PROFILE_FIELDS
    assert config["percentageOfNodesToScore"] == 100
    extenders = config["extenders"]
    assert sum(1 for e in extenders if e.get("bindVerb")) == 1, "exactly one extender binds"
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
    if "fragmentation" in where:  # every pod of its scheduler through the extender: no managedResources
        assert "managedResources" not in extender
    else:
        assert {r["name"]: r["ignoredByScheduler"] for r in extender["managedResources"]} == \
            dict.fromkeys(MANAGED, False)


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if CONTROL_PLANE_CONFIG[o]])
def test_the_cluster_scheduler_calls_the_service_the_variant_serves(overlay):
    objects = render(overlay)
    (workload, container), = extender_containers(objects)
    args = serve_args(container)
    service = find(objects, "Service", "cgpu-extender")
    config = read_yaml(CONTROL_PLANE_CONFIG[overlay])
    assert "profiles" not in config  # the cluster's own scheduler: default-scheduler
    url = urlparse(config["extenders"][0]["urlPrefix"])
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == url.port]
    assert url.port == args.port and url.path == args.prefix
    assert (url.scheme == "https") == bool(args.tls_cert) == (port["name"] == "https")
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"


def test_the_benchmarks_replay_the_shipped_configurations():
    from benchmarks.kube import CONFIG_OF

    assert CONFIG_OF["kube"] == ROOT / DEFAULT_CONFIG
    assert CONFIG_OF["shipped"] == MANIFESTS / "overlays" / "fragmentation" / "scheduler-config.yaml"


# -- variants ------------------------------------------------------------------------------------

@pytest.mark.parametrize("overlay", SECOND_SCHEDULER)
def test_second_scheduler_runs_beside_its_extender_on_loopback_and_leads_for_it(overlay):
    objects = render(overlay)
    deployment = find(objects, "Deployment", "cgpu-scheduler")
    containers = containers_of(deployment)
    assert list(containers) == ["cgpu-extender", "kube-scheduler"]  # the components patch containers/0
    raw = containers["cgpu-extender"]["args"]
    args = serve_args(containers["cgpu-extender"])
    ((where, config),) = scheduler_configs(objects)
    assert [p["schedulerName"] for p in config["profiles"]] == ["cgpu-scheduler"] == args.scheduler_names
    url = urlparse(config["extenders"][0]["urlPrefix"])
    assert (url.hostname, url.port, url.path) == ("127.0.0.1", args.port, args.prefix)
    assert "--config=/etc/cgpu-scheduler/config.yaml" in containers["kube-scheduler"]["command"]
    volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
    (mount,) = containers["kube-scheduler"]["volumeMounts"]
    assert mount["mountPath"] == "/etc/cgpu-scheduler" and volumes[mount["name"]]["configMap"]["name"] == \
        where.split("/")[0]
    # its own Lease, never the cluster scheduler's (kube-scheduler), and the extender follows it
    election = config["leaderElection"]
    assert election["leaderElect"] is True and election["resourceName"] == "cgpu-scheduler" != "kube-scheduler"
    follow = raw[raw.index("--leader-elect-follow"):]
    assert follow[:5] == ["--leader-elect-follow", "--leader-elect-resource-name", election["resourceName"],
                          "--leader-elect-resource-namespace", election["resourceNamespace"]]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in containers["cgpu-extender"]["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    if overlay == "fragmentation":
        assert args.scoring == "fragmentation" and args.score_all_pods
        assert "managedResources" not in config["extenders"][0]
    else:
        assert args.scoring == "ack" and not args.score_all_pods


def test_ha_variant_follows_the_leader_election_contract():
    objects = render("ha")
    deployment = find(objects, "Deployment", "cgpu-extender")
    spec, pod = deployment["spec"], pod_spec(deployment)
    (container,) = pod["containers"]
    assert spec["replicas"] == 2
    assert "--leader-elect" in container["args"] and serve_args(container).command == "serve"
    assert not [a for a in container["args"] if a.startswith("--leader-elect-")]  # the defaults: 15 s, 10 s, 2 s
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert container["readinessProbe"]["httpGet"]["path"].endswith("/readyz")  # the standby answers 503: no traffic
    assert container["livenessProbe"]["httpGet"]["path"].endswith("/healthz")
    # only the leader is ever Ready: a rollout may take it down (else it stops after the standby)
    rolling = spec["strategy"]["rollingUpdate"]
    unavailable = rolling["maxUnavailable"]
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert (int(unavailable[:-1]) * spec["replicas"] / 100 if str(unavailable).endswith("%") else unavailable) >= \
        spec["replicas"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"} in \
        pod["tolerations"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    budget = find(objects, "PodDisruptionBudget", "cgpu-extender")
    assert budget["spec"]["minAvailable"] == 1 and budget["metadata"]["namespace"] == "kube-system"
    assert budget["spec"]["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    role = find(objects, "Role", "cgpu-extender-leader-election")
    assert role["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["cgpu-extender"],
         "verbs": ["get", "update"]}]


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != "ha"])
def test_other_variants_run_one_replica_recreated(overlay):
    (deployment,) = workloads(render(overlay))
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_tls_variant_serves_https_to_client_certificates_and_probes_on_a_plain_port():
    objects = render("tls")
    deployment, service = find(objects, "Deployment", "cgpu-extender"), find(objects, "Service", "cgpu-extender")
    container = containers_of(deployment)["cgpu-extender"]
    args = serve_args(container)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for path in (args.tls_cert, args.tls_key, args.client_ca):
        assert path.startswith(mounts["tls"] + "/")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"] == {"secretName": "cgpu-extender-tls", "defaultMode": 0o440}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": args.port, "http": args.probe_port}
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == ports
    config = read_yaml(CONTROL_PLANE_CONFIG["tls"])
    url = urlparse(config["extenders"][0]["urlPrefix"])
    assert url.scheme == "https" and url.port == args.port
    policy = find(objects, "NetworkPolicy", "cgpu-extender")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= deployment["spec"]["template"]["metadata"][
        "labels"].items()
    verbs, probes = policy["spec"]["ingress"]
    assert verbs["from"] and [p["port"] for p in verbs["ports"]] == [args.port]
    assert "from" not in probes and [p["port"] for p in probes["ports"]] == [args.probe_port]


def test_placeholder_variant_grants_pod_writes_in_its_own_namespace_only():
    from extender.serving.config import Config

    defaults = Config()
    for name in ("autoscaling", "sidecar+autoscaling"):
        objects = render(name) if name in OVERLAYS else render_combo(name)
        (workload, container), = extender_containers(objects)
        assert serve_args(container).scale_up_placeholders
        namespace = find(objects, "Namespace")
        role = find(objects, "Role", "cgpu-extender-placeholders")
        priority = find(objects, "PriorityClass")
        assert namespace["metadata"]["name"] == role["metadata"]["namespace"] == defaults.placeholder_namespace
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}]
        # below every pod without a PriorityClass (0), not below cluster-autoscaler's default expendable cutoff (-10)
        assert priority["metadata"]["name"] == defaults.placeholder_priority_class
        assert -10 <= priority["value"] < 0 and priority["globalDefault"] is False


@pytest.mark.parametrize("name", [c for c in COMBOS if "defrag" in c])
def test_defrag_is_opt_in_with_eviction_only(name):
    (workload, container), = extender_containers(render_combo(name))
    assert "--defrag-execute" in container["args"]
    for overlay in OVERLAYS:
        (workload, container), = extender_containers(render(overlay))
        assert "--defrag-execute" not in container["args"]


def test_manifests_name_variants_by_their_overlay():
    for path in list(MANIFESTS.rglob("*.yaml")):
        assert not re.search(r"[Vv]ariant (1|2|A|B)\b", path.read_text()), path


# -- examples ------------------------------------------------------------------------------------

EXAMPLES = MANIFESTS / "examples"


def example(kind: str, name: str) -> dict:
    return next(d for p in sorted(EXAMPLES.glob("*.yaml")) for d in documents(p)
                if d["kind"] == kind and d["metadata"]["name"] == name)


def pod_of(workload: dict, name: str | None = None, uid: str | None = None) -> dict:
    template = workload["spec"]["template"]
    name = name or workload["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {**template.get("metadata", {}), "name": name, "namespace": "default", "uid": uid or name},
            "spec": template["spec"]}


def test_examples_ask_for_what_the_seeds_say():
    job = parse_pod_request(pod_of(example("Job", "cuda-sample")))
    assert (job.memory, job.core) == (2, 30)
    node = example("Node", "gpu-a10-node-1")
    spec = parse_node(node)
    assert spec.mode == MODE_CORE and spec.problem is None and (spec.gpu_count, spec.memory_per_gpu) == (2, 22)
    assert node["metadata"]["labels"]["gpu-spec"] == "NVIDIA-A10"
    assert node["spec"]["taints"] == [{"key": "scaler", "value": "gpu", "effect": "NoSchedule"}]


def test_the_sample_workloads_run_on_the_example_node_pool():
    """Deploy step 2's node (core_mem) takes the sample job and the binpack replicas: each passes
    filter there and binds, and binpack puts the replicas on the job's GPU."""
    import orjson

    from extender.serving.app import build_extender, create_app
    from extender.serving.config import Config

    node = example("Node", "gpu-a10-node-1")
    labels = node["metadata"]["labels"]
    job, deployment = example("Job", "cuda-sample"), example("Deployment", "binpack-demo")
    pods = [pod_of(job, "cuda-sample-x1")] + [pod_of(deployment, f"binpack-demo-{i}") for i in
                                              range(deployment["spec"]["replicas"])]
    extender = build_extender(Config(), cluster=EmbeddedCluster([node], source="examples"))
    client = create_app(Config(), extender=extender).test_client()
    for p in pods:
        spec = p["spec"]
        assert {"key": "scaler", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        assert all(labels.get(e["key"]) in e["values"] for e in term["matchExpressions"])
        body = orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": [node["metadata"]["name"]]})
        reply = orjson.loads(client.post("/cgpu-scheduler/filter", data=body, content_type="application/json").data)
        assert reply["NodeNames"] == [node["metadata"]["name"]], reply
        bind = {"PodName": p["metadata"]["name"], "PodNamespace": "default", "PodUID": p["metadata"]["uid"],
                "Node": node["metadata"]["name"]}
        assert orjson.loads(client.post("/cgpu-scheduler/bind", data=orjson.dumps(bind),
                                        content_type="application/json").data) == {"Error": ""}
    gpus = orjson.loads(client.get("/cgpu-scheduler/inspect").data)["nodes"][0]["gpus"]
    assert [len(g["pods"]) for g in gpus] == [len(pods), 0]
