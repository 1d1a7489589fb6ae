"""The ``cgpu-extender`` command line: its parser and ``main``, the console script."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version

from extender.cli import defrag, inspect, plan, serve

COMMANDS = (serve, inspect, plan, defrag)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cgpu-extender",
                                     description="Kubernetes scheduler extender for shared GPUs (ACK cGPU).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def package_version() -> str:
    """The installed distribution's version (setup.cfg's), or "unknown" when run from an uninstalled tree."""
    try:
        return version("cgpu-extender")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
