"""Subcommands of the ``cgpu-extender`` CLI, one module each.

A module has ``register(subparsers)``, which adds its parser and sets
``run=`` (a function of the parsed arguments returning the exit status).
"""
