"""The ``cgpu-extender`` command line."""

from __future__ import annotations

import argparse
import sys

from extender.commands import defrag, inspect, plan, serve, simulate

COMMANDS = (serve, inspect, plan, defrag, simulate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cgpu-extender",
                                     description="Kubernetes scheduler extender for shared GPUs (ACK cGPU).")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: list | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
