"""The README's and docs' walk-throughs, run as written against `cgpu-extender serve --demo`.

The shell blocks of docs/try-it.md (curl against the demo) are executed with bash
and curl; every reply must equal the output the page shows; so must the metrics
docs/metrics.md shows after them. The README's install steps are checked against
the manifests (tests/test_docs.py checks the names it uses exist).
"""

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from demo_server import serving_demo
from extender.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TRY_IT = (ROOT / "docs" / "try-it.md").read_text()
METRICS = (ROOT / "docs" / "metrics.md").read_text()
HTTP_API = (ROOT / "docs" / "http-api.md").read_text()
DEMO_URL = "http://127.0.0.1:32766/cgpu-scheduler"


def blocks(text: str) -> list:
    """(language, body) of every fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def section(title: str, text: str = README) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


CURL = blocks(section("Try it with curl", TRY_IT))


@pytest.fixture
def demo():
    with serving_demo() as url:
        yield url


def json_values(text: str) -> list:
    decoder, values, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        value, i = decoder.raw_decode(text, i)
        values.append(value)
    return values


def shown_after_hash(block: str) -> list:
    """The outputs a shell block shows as `# <json>` comments."""
    return [json.loads(line.strip()[2:]) for line in block.splitlines() if line.strip().startswith("# [")
            or line.strip().startswith("# {")]


@pytest.mark.skipif(not shutil.which("curl") or not shutil.which("bash"), reason="needs bash and curl")
def test_the_curl_walk_through_prints_what_the_readme_shows(demo):
    (lang1, filter_sh), (lang2, filter_shown), (lang3, rest_sh), (lang4, annotations_shown) = \
        [b for b in CURL if b[0] in ("sh", "json")][:4]
    assert (lang1, lang2, lang3, lang4) == ("sh", "json", "sh", "json")
    assert DEMO_URL in filter_sh
    script = (filter_sh + "\necho\n" + rest_sh).replace(DEMO_URL, demo)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    filtered, scores, bound, report = json_values(done.stdout)

    assert filtered == json.loads(filter_shown)
    assert [scores, bound] == shown_after_hash(rest_sh)

    node = next(n for n in report["nodes"] if n["name"] == "gpu-core-a")
    (gpu,) = [g for g in node["gpus"] if any(p["name"] == "cuda-sample" for p in g["pods"])]
    prose = section("Try it with curl", TRY_IT)
    assert f"on GPU {gpu['index']} of `gpu-core-a`" in prose
    assert f"that GPU at {gpu['memory']['used']}/{gpu['memory']['total']} GiB and " \
           f"{gpu['core']['used']}/{gpu['core']['total']} % compute" in prose
    written = next(p for p in gpu["pods"] if p["name"] == "cuda-sample")["annotations"]
    shown = json.loads("{" + annotations_shown.strip().replace("\n", " ") + "}")
    assume = {k for k in shown if k.endswith(("assume-time", "ASSUME_TIME"))}
    assert {k: v for k, v in written.items() if k not in assume} == {k: v for k, v in shown.items()
                                                                      if k not in assume}
    assert set(written) == set(shown) and len({written[k] for k in assume}) == 1
    assert list(written) == list(shown), "shown in the order inspect prints them"


def test_the_invalid_pod_example_gets_the_message_the_readme_quotes(demo):
    shell = "\n".join(body for lang, body in CURL if lang == "sh")
    pod = json.loads(re.search(r"POD='(.*?)'", shell, re.S).group(1))
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    limits["aliyun.com/gpu-core.percentage"] = "33"
    pod["metadata"]["uid"] = "invalid-example"
    body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": ["gpu-core-a", "gpu-cgpu-a"]}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{demo}/filter", data=body, headers={"Content-Type": "application/json"}), timeout=5) as reply:
        result = json.loads(reply.read())
    quoted = re.search(r"filter refuses\s+every node with `(.*?)`", section("Try it with curl", TRY_IT), re.S).group(1)
    assert set(result["FailedAndUnresolvableNodes"].values()) == {re.sub(r"\s+", " ", quoted)}


def test_the_readme_scheduler_config_is_the_manifest():
    (snippet,) = [body for lang, body in blocks(section("Using it with kube-scheduler", HTTP_API)) if lang == "yaml"]
    assert yaml.safe_load(snippet) == yaml.safe_load((ROOT / "manifests" / "overlays" / "default" /
                                                       "scheduler-config.yaml").read_text())


def test_the_two_commands_are_what_ci_and_dev_run():
    assert "./dev demo" in README and "./dev test" in README
    dev = (ROOT / "dev").read_text()
    assert "    demo)" in dev and "    test)" in dev and "serve --demo" in dev
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec ./dev test")


def test_the_static_pod_edit_of_the_install_steps_is_a_valid_pod_that_mounts_the_config():
    import kubernetes_validate

    deploying = section("Install")
    (edit,) = [yaml.safe_load(re.sub(r"^   ", "", body, flags=re.M)) for lang, body in blocks(
        re.sub(r"^   ```", "```", deploying, flags=re.M)) if lang == "yaml"]
    spec = edit["spec"]
    (container,) = spec["containers"]
    config = next(a for a in container["command"] if a.startswith("--config=")).split("=", 1)[1]
    (mount,) = container["volumeMounts"]
    (volume,) = spec["volumes"]
    assert mount["mountPath"] == volume["hostPath"]["path"] == config and mount["name"] == volume["name"]
    assert f"copy the file to `{config}`" in deploying.lower()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
           "spec": {**spec, "hostNetwork": True,
                    "containers": [{**container, "image": "registry.k8s.io/kube-scheduler:v1.31.4"}]}}
    kubernetes_validate.validate(pod, "1.28", strict=True)
    config_file = yaml.safe_load((ROOT / "manifests" / "overlays" / "default" / "scheduler-config.yaml").read_text())
    assert config_file["clientConnection"]["kubeconfig"] in deploying


@pytest.mark.skipif(not shutil.which("curl") or not shutil.which("bash"), reason="needs bash and curl")
def test_the_metrics_after_the_walk_through_are_what_the_readme_shows(demo):
    filter_sh, _, rest_sh = [body for lang, body in CURL if lang in ("sh", "json")][:3]
    (metrics_sh, shown), = [(body, blocks(METRICS)[i + 1][1])
                            for i, (lang, body) in enumerate(blocks(METRICS))
                            if lang == "sh" and "/metrics" in body]
    script = (filter_sh + "\n" + rest_sh + "\n").replace(DEMO_URL, demo)
    script = script.replace("\ncurl", "\ncurl -o /dev/null") + metrics_sh
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown.strip().splitlines()
