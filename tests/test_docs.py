"""What the README and docs/ name exists: paths, serve's flags, commands, routes, metrics, alerts.

And the README stays an operator's page: it installs before line 150 and is about 350 lines.
"""

import configparser
import re
from pathlib import Path

import pytest
import yaml

from exported_metrics import exported, sample_names
from extender.cli.main import build_parser
from extender.serving.app import create_app
from extender.serving.config import Config
from extender.serving.http_verbs import VERBS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = {path.name: path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))}
TEXTS = {"README.md": README, **{f"docs/{name}": text for name, text in PAGES.items()}}


def code_spans(text: str) -> list:
    """Inline code and fenced blocks: where names are written."""
    return re.findall(r"`([^`\n]+)`", text) + re.findall(r"^```\w*\n(.*?)^```", text, re.S | re.M)


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_path_a_page_names_exists(name):
    text = TEXTS[name]
    named = set(re.findall(r"(?<![\w/.:-])((?:manifests|benchmarks|policy|extender|tests|docs)/[\w./-]*\w)", text))
    named |= {link for link in re.findall(r"\]\(([^)#:]+)", text) if not link.startswith("http")}
    named = {p for p in named if not re.fullmatch(r"policy/v1\w*", p)  # an API group and version, no path
             and not re.search(r"/[A-Z]+(/|$)", p)}  # a placeholder: manifests/overlays/OVERLAY
    base = ROOT if name == "README.md" else ROOT / "docs"
    missing = [p for p in sorted(named) if not ((ROOT / p).exists() or (base / p).exists())]
    assert named and not missing, missing


def serve_options() -> set:
    parser = build_parser()._subparsers._group_actions[0].choices["serve"]
    return {o for action in parser._actions for o in action.option_strings if o.startswith("--")}


def test_the_readme_lists_every_serve_flag_and_only_real_ones():
    usage = re.search(r"^cgpu-extender serve (\[.*?)^cgpu-extender --version", README, re.S | re.M).group(1)
    listed = set(re.findall(r"--[a-z-]+", usage))
    assert listed == serve_options() - {"--help"}, (listed ^ (serve_options() - {"--help"}))


def serve_lines(text: str) -> list:
    """The lines of code that run ``serve``, with the indented lines that continue them."""
    found = []
    for span in code_spans(text):
        going = False
        for line in span.splitlines():
            going = bool(re.search(r"\bserve( |$)", line)) or (going and line.startswith(" "))
            if going:
                found.append(line.split("#")[0])
    return found


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_serve_flag_a_page_names_is_real(name):
    named = {flag for line in serve_lines(TEXTS[name]) for flag in re.findall(r"--[a-z-]+", line)}
    assert named <= serve_options() | {"--help"}, named - serve_options()


def test_the_commands_the_readme_names_exist():
    parser = build_parser()
    subcommands = set(parser._subparsers._group_actions[0].choices)
    named = set(re.findall(r"(?:`|^)cgpu-extender (\w+)", README, re.M))
    assert named <= subcommands, named - subcommands
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    scripts = {line.split("=")[0].strip() for line in setup["options.entry_points"]["console_scripts"].splitlines()
               if line.strip()}
    for script in ("cgpu-extender", "kubectl-inspect-cgpu", "cgpu-simulate"):
        assert script in README and script in scripts, script
    assert parser.parse_args(["serve"]).command == "serve"
    with pytest.raises(SystemExit):
        parser.parse_args(["--version"])


def test_the_routes_the_readme_names_are_served():
    app = create_app(Config())
    served = {(method, rule.rule.rsplit("/", 1)[1]) for rule in app.url_map.iter_rules()
              for method in rule.methods if method in ("GET", "POST")}
    named = set(re.findall(r"`(GET|POST) (\w+)`", README))
    listing = re.search(r"Routes \(under `--prefix`\): (.*?)\(\[", README, re.S).group(1)
    post, get = listing.split("`GET ")
    named |= {("POST", route) for route in re.findall(r"(\w+)`", post)}
    named |= {("GET", route) for route in re.findall(r"(\w+)`", "`GET " + get)}
    assert {("POST", verb) for verb in VERBS} <= named
    assert named and named <= served, named - served


def documented_metrics(text: str) -> set:
    return set(re.findall(r"\bcgpu_[a-z_]+[a-z]", text))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_metric_a_page_names_is_exported(name):
    exported_names = sample_names(exported()) | set(exported())
    named = {m for m in documented_metrics(TEXTS[name]) if not m.startswith(("cgpu_scheduler", "cgpu_extender"))}
    assert not (named - exported_names), named - exported_names


def test_the_metrics_table_lists_every_family_the_extender_exports():
    table = PAGES["metrics.md"].split("| family | labels | series |")[1].split("\n\n")[0]
    listed = documented_metrics(table)
    families = {name for name in exported()  # less prometheus_client's own <histogram>_created series
                if not (name.endswith("_created") and exported().get(name[:-len("_created")], ("",))[0] == "histogram")}
    wanted = sample_names({name: exported()[name] for name in families}) | families
    missing = {name for name in families
               if not ((sample_names({name: exported()[name]}) | {name}) & listed)}
    assert not missing, missing
    assert listed <= wanted, listed - wanted


def test_the_alerts_the_readme_names_exist():
    rules = yaml.safe_load((ROOT / "manifests/components/monitoring/prometheusrule.yaml").read_text())
    alerts = {rule["alert"] for group in rules["spec"]["groups"] for rule in group["rules"] if "alert" in rule}
    named = set(re.findall(r"`(Cgpu\w+)`", README))
    assert named and named <= alerts, named - alerts


def test_the_readme_is_an_operators_page():
    lines = README.splitlines()
    assert len(lines) <= 400
    install = next(i for i, line in enumerate(lines) if line.startswith("## Install"))
    first_apply = next(i for i, line in enumerate(lines) if line.startswith("kubectl apply -k"))
    assert install < 100 and first_apply < 150
    for heading in ("## Requirements", "## Two commands", "## Install", "## Verify", "## Operate",
                    "## Troubleshoot", "## Upgrade and uninstall"):
        assert heading in lines, heading
    assert "isolation" in README[:2500] and "device plugin" in README[:2500]  # what it is not, up front
