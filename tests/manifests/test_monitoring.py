"""The metrics path: scraping (ServiceMonitor, pod annotations), the Prometheus Adapter rules
that give HPA "GPU memory used / allocated" per pod, and the example HPA.

The adapter's templates are filled in as prometheus-adapter fills them for a pods query
(``<<.LabelMatchers>>`` = namespace and pod matchers, ``<<.GroupBy>>`` = the pod label,
``<<index .LabelValuesByName "L">>`` = the values asked for label L) and the result must be
valid PromQL whose selectors name series and labels a real scrape of the extender has.
"""

import re

import orjson
import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from builders import scheduler_pod
from extender.app import create_app
from extender.cli import build_parser
from extender.config import Config
from test_manifests import containers_of, find, pod_of
from policy.request import parse_pod_request

PROMETHEUS_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
# Fields of the Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1) this project may use.
SERVICE_MONITOR_SPEC = {"selector", "namespaceSelector", "endpoints", "jobLabel", "targetLabels", "sampleLimit"}
ENDPOINT_FIELDS = {"port", "path", "scheme", "interval", "scrapeTimeout", "honorLabels", "relabelings",
                   "metricRelabelings"}
RULE_FIELDS = {"seriesQuery", "seriesFilters", "resources", "name", "metricsQuery"}
TEMPLATE = re.compile(r"<<(.*?)>>")
DENOMINATOR = "cgpu_pod_gpu_memory_allocated_bytes"
SERVE = build_parser().parse_args(containers_of(find("Deployment", "cgpu-extender"))["cgpu-extender"]["args"])


def adapter_rules() -> list:
    return yaml.safe_load(find("ConfigMap", "adapter-config")["data"]["config.yaml"])["rules"]


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


def selectors(expr) -> list:
    """Every vector selector in a parsed PromQL expression."""
    if type(expr).__name__ == "VectorSelector":
        return [expr]
    found = []
    for part in ("lhs", "rhs", "expr", "param"):
        child = getattr(expr, part, None)
        if child is not None and not isinstance(child, (str, int, float)):
            found += selectors(child)
    for arg in getattr(expr, "args", None) or []:
        found += selectors(arg)
    return found


@pytest.fixture(scope="module")
def scraped():
    """Family name → label names, from a real scrape after the README's filter and bind."""
    client = create_app(Config()).test_client()
    p = scheduler_pod()
    client.post("/cgpu-scheduler/filter", data=orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": ["gpu-core-a"]}))
    client.post("/cgpu-scheduler/bind", data=orjson.dumps({"PodName": p["metadata"]["name"], "PodNamespace": "default",
                                                           "PodUID": p["metadata"]["uid"], "Node": "gpu-core-a"}))
    text = client.get("/cgpu-scheduler/metrics").get_data(as_text=True)
    return {f.name: {label for s in f.samples for label in s.labels} for f in text_string_to_metric_families(text)}


def test_the_service_monitor_scrapes_the_service_the_extender_serves_metrics_on():
    monitor, service = find("ServiceMonitor", "cgpu-extender"), find("Service", "cgpu-extender")
    spec = monitor["spec"]
    assert set(spec) <= SERVICE_MONITOR_SPEC
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= ENDPOINT_FIELDS
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == f"{SERVE.prefix}/metrics"
    assert PROMETHEUS_DURATION.match(endpoint["interval"]) and PROMETHEUS_DURATION.match(endpoint["scrapeTimeout"])
    assert endpoint["honorLabels"] is True  # the per-pod series' namespace and pod must not become exported_*


def test_the_pod_annotations_name_the_port_and_path_it_serves():
    template = find("Deployment", "cgpu-extender")["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == SERVE.port
    assert annotations["prometheus.io/path"] == f"{SERVE.prefix}/metrics"


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
    hpa = find("HorizontalPodAutoscaler", "binpack-demo")
    target = hpa["spec"]["scaleTargetRef"]
    deployment = find(target["kind"], target["name"])
    assert parse_pod_request(pod_of(deployment)).memory > 0  # its pods hold a share the extender allocates
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] in {metric_name(r) for r in adapter_rules()}
    assert metric["pods"]["target"]["type"] == "AverageValue"
