"""constraints.txt pins the tested versions: every requirement of setup.cfg (runtime and test) has
an exact pin within its range, ./dev and the Dockerfile install with it, and the environment these
tests run in is the pinned one. The package's license is the file setup.cfg names."""

import configparser
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def setup() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def requirements() -> list:
    config = setup()
    lines = config["options"]["install_requires"].split("\n") + config["options.extras_require"]["test"].split("\n")
    return [Requirement(line) for line in lines if line.strip()]


def pins() -> dict:
    """canonical name → (version, marker or None), from constraints.txt."""
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"not an exact pin: {line}"
        name = canonicalize_name(requirement.name)
        assert name not in found, f"pinned twice: {name}"
        found[name] = (spec.version, requirement.marker)
    return found


def applies(marker: Marker | None) -> bool:
    return marker is None or marker.evaluate()


def test_every_requirement_is_pinned_within_its_range():
    pinned = pins()
    needed = requirements()
    assert len(needed) >= 12
    for requirement in needed:
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} has no pin in constraints.txt"
        assert requirement.specifier.contains(pinned[name][0], prereleases=True), (str(requirement), pinned[name])


def test_the_tests_run_on_the_pinned_versions():
    checked = 0
    for name, (pinned, marker) in pins().items():
        if not applies(marker):
            continue
        try:
            installed = version(name)
        except PackageNotFoundError:
            continue  # a pin for another platform's or extra's dependency
        assert installed == pinned, f"{name} {installed} installed, {pinned} pinned: run ./dev test"
        checked += 1
    assert checked >= len(requirements())


def test_dev_and_the_image_install_with_the_constraints():
    assert re.search(r"pip install .*-c constraints\.txt", (ROOT / "dev").read_text())
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^COPY [^\n]*\bconstraints\.txt\b", dockerfile, re.M)
    assert re.search(r"^RUN pip install -c constraints\.txt \.", dockerfile, re.M)


def test_the_license_is_the_apache_license_setup_cfg_names():
    metadata = setup()["metadata"]
    assert metadata["license"] == "Apache-2.0"
    text = (ROOT / metadata["license_files"]).read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX: How to apply the Apache License" in text
    assert re.search(r"^COPY [^\n]*\bLICENSE\b", (ROOT / "Dockerfile").read_text(), re.M)
