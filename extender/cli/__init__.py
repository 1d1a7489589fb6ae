"""The command lines: ``cgpu-extender`` and its subcommands, ``kubectl-inspect-cgpu``.

* :mod:`~extender.cli.main` — ``cgpu-extender`` (``main``, the console script; ``python -m extender``);
* one module per subcommand — :mod:`~extender.cli.serve`, :mod:`~extender.cli.inspect` (also
  ``kubectl-inspect-cgpu``), :mod:`~extender.cli.plan`, :mod:`~extender.cli.defrag` — each with
  ``register(subparsers)``, which adds its parser and sets ``run=`` (a function of the parsed
  arguments returning the exit status); :mod:`~extender.cli.election_flags` is ``serve``'s leader
  election flags.

A bad argument is one line on stderr and exit 2. The trace replay is not here:
it is the bench's (``cgpu-simulate``, :mod:`benchmarks.simulate`), and the
service never imports :mod:`benchmarks`. May import every room of
:mod:`extender` (layering: tests/test_layout.py).
"""
