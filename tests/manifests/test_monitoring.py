"""The metrics path: scraping (the ServiceMonitor of components/monitoring, on every variant it
composes with), the alert rules and the Grafana dashboard (every expression parses and reads only
metrics the extender exports), the Prometheus Adapter rules that give HPA "GPU memory used /
allocated" per pod, and the example HPA.

The adapter's templates are filled in as prometheus-adapter fills them for a pods query
(``<<.LabelMatchers>>`` = namespace and pod matchers, ``<<.GroupBy>>`` = the pod label,
``<<index .LabelValuesByName "L">>`` = the values asked for label L) and the result must be
valid PromQL whose selectors name series and labels a real scrape of the extender has.
"""

import json
import re

import orjson
import promql_parser
import pytest
import yaml
from kubernetes import client as kube_client
from prometheus_client.parser import text_string_to_metric_families

from builders import node, pod, scheduler_pod
from exported_metrics import exported, sample_names
from extender.serving.app import build_extender, create_app
from extender.serving.config import Config
from policy.request import parse_pod_request
from rendered import (MANIFESTS, containers_of, extender_containers, find, render, render_combo, serve_args)
from test_manifests import example, pod_of

PROMETHEUS_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
# Fields of the Prometheus Operator's ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1) used here.
SERVICE_MONITOR_SPEC = {"selector", "namespaceSelector", "endpoints", "jobLabel", "targetLabels", "sampleLimit"}
ENDPOINT_FIELDS = {"port", "path", "scheme", "interval", "scrapeTimeout", "honorLabels", "relabelings",
                   "metricRelabelings"}
ALERT_FIELDS = {"alert", "expr", "for", "labels", "annotations"}
RULE_FIELDS = {"seriesQuery", "seriesFilters", "resources", "name", "metricsQuery"}
TEMPLATE = re.compile(r"<<(.*?)>>")
DENOMINATOR = "cgpu_pod_gpu_memory_allocated_bytes"
MONITORED = {"monitoring": lambda: render("monitoring"), "tls+monitoring": lambda: render_combo("tls+monitoring"),
             "ha+monitoring": lambda: render_combo("ha+monitoring"),
             "ha+tls+monitoring+autoscaling": lambda: render_combo("ha+tls+monitoring+autoscaling")}
DASHBOARD = MANIFESTS / "components" / "monitoring" / "dashboards" / "cgpu-extender.json"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def selectors(expr) -> list:
    """Every vector selector in a parsed PromQL expression (inside range selectors and subqueries too)."""
    if type(expr).__name__ == "VectorSelector":
        return [expr]
    found = []
    for part in ("lhs", "rhs", "expr", "param", "vector_selector"):
        child = getattr(expr, part, None)
        if child is not None and not isinstance(child, (str, int, float)):
            found += selectors(child)
    for arg in getattr(expr, "args", None) or []:
        found += selectors(arg)
    return found


def groupings(expr) -> set:
    """Labels an expression's result can carry: those its aggregations keep (``by``)."""
    kept = set()
    if type(expr).__name__ == "AggregateExpr" and expr.modifier is not None and str(expr.modifier).startswith("by"):
        kept |= set(expr.modifier.labels)
    for part in ("lhs", "rhs", "expr"):
        child = getattr(expr, part, None)
        if child is not None and not isinstance(child, (str, int, float)):
            kept |= groupings(child)
    for arg in getattr(expr, "args", None) or []:
        kept |= groupings(arg)
    return kept


def names(families) -> set:
    """The sample names a query may select, by each family's type (a family with no sample yet included)."""
    found = set()
    for family in families:
        found |= {s.name for s in family.samples}
        found |= {"counter": {f"{family.name}_total"}, "histogram": {f"{family.name}_{s}" for s in
                  ("bucket", "count", "sum")}}.get(family.type, {family.name})
    return found


def post(client, verb: str, payload: dict) -> dict:
    reply = client.post(f"/cgpu-scheduler/{verb}", data=orjson.dumps(payload), content_type="application/json")
    assert reply.status_code == 200
    return orjson.loads(reply.data)


@pytest.fixture(scope="module")
def scraped():
    """Family name → label names, from a real scrape after the README's filter and bind."""
    client = create_app(Config()).test_client()
    p = scheduler_pod()
    post(client, "filter", {"Pod": p, "Nodes": None, "NodeNames": ["gpu-core-a"]})
    post(client, "bind", {"PodName": p["metadata"]["name"], "PodNamespace": "default", "PodUID": p["metadata"]["uid"],
                          "Node": "gpu-core-a"})
    text = client.get("/cgpu-scheduler/metrics").get_data(as_text=True)
    return {f.name: {label for s in f.samples for label in s.labels} for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def registry():
    """Every sample name the extender exports (tests/exported_metrics.py)."""
    found = sample_names(exported())
    assert {"cgpu_watch_errors_total", "cgpu_placeholders_errors_total", "cgpu_request_duration_seconds_bucket",
            "cgpu_pending_pod_max_age_seconds", "cgpu_verb_errors_total", "cgpu_defrag_moves_total"} <= found
    return found


# -- scraping ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MONITORED)
def test_the_service_monitor_scrapes_the_plain_port_the_service_names(name):
    objects = MONITORED[name]()
    monitor, service = find(objects, "ServiceMonitor", "cgpu-extender"), find(objects, "Service", "cgpu-extender")
    (workload, container), = extender_containers(objects)
    args = serve_args(container)
    spec = monitor["spec"]
    assert set(spec) <= SERVICE_MONITOR_SPEC
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= ENDPOINT_FIELDS
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    # the container port it reaches serves metrics in plain HTTP: the probe port when the verbs take TLS
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports[port["targetPort"]] == (args.probe_port if args.tls_cert else args.port)
    assert endpoint.get("scheme", "http") == "http"
    assert endpoint["path"] == f"{args.prefix}/metrics"
    assert PROMETHEUS_DURATION.match(endpoint["interval"]) and PROMETHEUS_DURATION.match(endpoint["scrapeTimeout"])
    assert endpoint["honorLabels"] is True  # the per-pod series' namespace and pod must not become exported_*


# -- alert rules ---------------------------------------------------------------------------------

def alerts() -> list:
    rule = find(render("monitoring"), "PrometheusRule", "cgpu-extender")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and set(rule["spec"]) == {"groups"}
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


ALERTS = alerts()


@pytest.mark.parametrize("rule", ALERTS, ids=[r["alert"] for r in ALERTS])
def test_each_alert_parses_reads_real_metrics_and_says_what_to_do(rule, registry):
    assert set(rule) <= ALERT_FIELDS and re.fullmatch(r"Cgpu[A-Z][A-Za-z]+", rule["alert"])
    expr = promql_parser.parse(rule["expr"])
    used = {s.name for s in selectors(expr)}
    assert used and used <= registry, used - registry
    assert PROMETHEUS_DURATION.match(rule["for"])
    assert rule["labels"]["severity"] in ("critical", "warning")
    annotations = rule["annotations"]
    assert set(annotations) == {"summary", "description"}
    assert "\n" not in annotations["summary"] and len(annotations["summary"]) <= 120
    description = annotations["description"]
    assert len(description.split()) >= 40 and "`" in description  # what it means, and a command to look with
    for text in annotations.values():  # a label the expression's result does not carry renders empty
        assert set(re.findall(r"\$labels\.(\w+)", text)) <= groupings(expr), text


def test_the_alerts_cover_what_operators_are_paged_for():
    by_metric = {}
    for rule in ALERTS:
        for selector in selectors(promql_parser.parse(rule["expr"])):
            by_metric.setdefault(selector.name, set()).add(rule["alert"])
            for matcher in selector.matchers.matchers:
                by_metric.setdefault(f"{selector.name}{{{matcher.name}={matcher.value}}}", set()).add(rule["alert"])
    for needed in ("cgpu_ready", "cgpu_verb_errors_total", "cgpu_binds_total", "cgpu_pending_pod_max_age_seconds",
                   "cgpu_stranded_gpus", "cgpu_request_duration_seconds_bucket{verb=bind}",
                   "cgpu_request_duration_seconds_bucket{verb=filter}"):
        assert needed in by_metric, needed
    down = next(r for r in ALERTS if r["alert"] == "CgpuExtenderDown")
    assert down["expr"] == "absent(cgpu_ready)" and down["labels"]["severity"] == "critical"
    assert len({r["alert"] for r in ALERTS}) == len(ALERTS)


# -- dashboard -----------------------------------------------------------------------------------

def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict) -> list:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_the_dashboard_ships_in_the_monitoring_overlay_as_grafana_loads_it():
    configmap = find(render("monitoring"), "ConfigMap", "cgpu-extender-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["data"] == {DASHBOARD.name: DASHBOARD.read_text()}


def test_the_dashboard_lays_out_its_panels_without_overlap():
    board = dashboard()
    assert board["uid"] == "cgpu-extender" and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in board["panels"]:
        box = p["gridPos"]
        assert 0 <= box["x"] and box["x"] + box["w"] <= 24
        mine = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
        assert not mine & cells, p["title"]
        cells |= mine
    (variable,) = board["templating"]["list"]
    assert variable["type"] == "datasource" and variable["query"] == "prometheus"
    for p in panels(board):
        assert p["datasource"]["uid"] == "${" + variable["name"] + "}" and p["title"] and p["targets"]


@pytest.mark.parametrize("panel", panels(dashboard()), ids=[p["title"] for p in panels(dashboard())])
def test_every_dashboard_query_parses_and_reads_real_metrics(panel, registry):
    for target in panel["targets"]:
        expr = target["expr"]
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, expr
        used = {s.name for s in selectors(promql_parser.parse(expr))}
        assert used and used <= registry, used - registry
        for label in re.findall(r"\{\{(\w+)\}\}", target.get("legendFormat", "")):
            assert label in groupings(promql_parser.parse(expr)), (panel["title"], label)


# -- Prometheus Adapter and HPA (examples) --------------------------------------------------------

def adapter_rules() -> list:
    configmap = example("ConfigMap", "cgpu-extender-adapter-rules")
    return yaml.safe_load(configmap["data"]["config.yaml"])["rules"]


def test_the_adapter_rules_never_take_the_adapters_own_configmap_name():
    configmap = example("ConfigMap", "cgpu-extender-adapter-rules")
    assert configmap["metadata"]["name"] not in ("adapter-config", "prometheus-adapter")


def resource_labels(rule) -> dict:
    """resource → the series label that names it, from ``resources.overrides``."""
    return {override["resource"]: label for label, override in rule["resources"]["overrides"].items()}


def metric_name(rule) -> str:
    """The custom metric the rule exposes for its series (``name.matches`` → ``name.as``, Go's ``${1}``)."""
    series = promql_parser.parse(rule["seriesQuery"]).name
    pattern = rule["name"]["matches"]
    assert re.search(pattern, series), (pattern, series)
    return re.sub(pattern, re.sub(r"\$\{(\d+)\}", r"\\\1", rule["name"]["as"]), series)


def filled(rule, namespace="default", pods=("cuda-sample-7x9kq", "other")) -> str:
    """The rule's metricsQuery as prometheus-adapter builds it for a pods query."""
    labels = resource_labels(rule)
    values = {labels["namespace"]: namespace, labels["pod"]: "|".join(pods)}
    matchers = f'{labels["namespace"]}="{namespace}",{labels["pod"]}=~"{"|".join(pods)}"'
    series = promql_parser.parse(rule["seriesQuery"]).name

    def fill(match):
        action = match.group(1).strip()
        if action == ".Series":
            return series
        if action == ".LabelMatchers":
            return matchers
        if action == ".GroupBy":
            return labels["pod"]
        index = re.fullmatch(r'index \.LabelValuesByName "(\w+)"', action)
        assert index, f"template action prometheus-adapter would not fill this way: {action}"
        return values[index.group(1)]

    return TEMPLATE.sub(fill, rule["metricsQuery"])


def test_adapter_rules_have_the_shape_ack_documents_and_valid_promql(scraped):
    rules = adapter_rules()
    assert rules
    for rule in rules:
        assert set(rule) <= RULE_FIELDS and {"seriesQuery", "resources", "name", "metricsQuery"} <= set(rule)
        labels = resource_labels(rule)
        assert set(labels) == {"namespace", "pod"}
        series = promql_parser.parse(rule["seriesQuery"])  # a selector on one series name
        assert type(series).__name__ == "VectorSelector" and series.name
        assert {m.name for m in series.matchers.matchers} == set(labels.values())
        query = promql_parser.parse(filled(rule))
        for selector in selectors(query):
            if selector.name == DENOMINATOR:  # ours: only labels the extender's series carry
                assert {m.name for m in selector.matchers.matchers} <= scraped[DENOMINATOR]


def test_the_ratio_divides_the_pods_gpu_memory_use_by_this_extenders_allocation(scraped):
    (rule,) = [r for r in adapter_rules() if metric_name(r) == "gpu_memory_used_allocated_ratio"]
    query = promql_parser.parse(filled(rule))
    assert str(query.op) == "/"
    numerator, denominator = selectors(query.lhs), selectors(query.rhs)
    assert [s.name for s in numerator] == ["DCGM_CUSTOM_PROCESS_MEM_USED"]
    assert [s.name for s in denominator] == [DENOMINATOR]
    # the denominator is restricted to the namespace and pods the HPA asked about
    assert {(m.name, m.value) for m in denominator[0].matchers.matchers} == {
        ("namespace", "default"), ("pod", "cuda-sample-7x9kq|other")}
    assert {"namespace", "pod"} <= scraped[DENOMINATOR]
    # both sides are grouped by the label the adapter groups pods by, and matched on it
    assert str(query.modifier.matching) == "on (PodName)" and query.modifier.matching.labels == ["PodName"]
    assert "1048576" in filled(rule)  # MiB → bytes, the unit of the denominator


def test_the_example_hpa_scales_a_shared_gpu_deployment_on_the_ratio():
    hpa = example("HorizontalPodAutoscaler", "binpack-demo")
    target = hpa["spec"]["scaleTargetRef"]
    deployment = example(target["kind"], target["name"])
    assert parse_pod_request(pod_of(deployment)).memory > 0  # its pods hold a share the extender allocates
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] in {metric_name(r) for r in adapter_rules()}
    assert metric["pods"]["target"]["type"] == "AverageValue"
