"""The Dockerfile's image: what it copies must be enough for `serve` and `inspect`.

The image installs only the directories the Dockerfile COPYs (benchmarks/ is left
out, and .dockerignore drops it too). A module of policy/ or extender/ that
imports a package the image lacks crashes the container at start, so every one
of them is imported here with the left-out packages made unimportable.
"""

import configparser
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copied() -> set:
    names = set()
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            names.update(Path(p).name for p in line.split()[1:-1])
    return names


def packaged() -> set:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    include = config["options.packages.find"]["include"].split()
    return {name for name in include if "." not in name}


def test_the_dockerfile_copies_the_runtime_packages_and_the_build_files():
    assert {"policy", "extender", "setup.cfg", "pyproject.toml", "README.md", "LICENSE", "constraints.txt"} <= copied()
    assert re.search(r'^CMD \["serve"', (ROOT / "Dockerfile").read_text(), re.M)


def test_every_module_the_image_installs_imports_without_the_packages_it_leaves_out():
    missing = sorted(packaged() - copied())
    assert "benchmarks" in missing  # else this test checks nothing
    script = f"""
import importlib, pkgutil, sys

class LeftOut:  # as if the packages were not installed (the source checkout has them)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {missing!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, LeftOut())
import extender, policy
for package in (extender, policy):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not module.name.endswith(".__main__"):
            importlib.import_module(module.name)
from extender.cli.main import build_parser
args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "32766"])
assert args.command == "serve"
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def console_scripts() -> dict:
    """name → ``module:function`` of setup.cfg's console scripts."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict((part.strip() for part in line.split("=", 1)) for line in lines)


def test_the_image_drops_the_commands_of_the_packages_it_leaves_out():
    """pip installs every console script, whether its package was copied or not: one whose package the
    image lacks would end in a traceback, so the Dockerfile removes it (and keeps the others)."""
    scripts, missing = console_scripts(), packaged() - copied()
    left_out = {name for name, target in scripts.items() if target.split(".")[0] in missing}
    assert left_out == {"cgpu-simulate"} and scripts["cgpu-extender"] == "extender.cli.main:main"
    install = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if "pip install" in line)
    removed = {Path(word).name for word in install.split() if word.startswith("/usr/local/bin/")}
    assert removed == left_out


def test_the_image_runs_as_the_user_the_manifests_name():
    from rendered import extender_containers, pod_spec, render

    user = re.search(r"^USER (\d+):(\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert user and int(user.group(1)) > 0
    (workload, _), = extender_containers(render("default"))
    context = pod_spec(workload)["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == (int(user.group(1)), int(user.group(2)))


def test_every_console_script_names_a_function_that_exists():
    import importlib

    for name, target in console_scripts().items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), name
