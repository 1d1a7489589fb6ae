"""Placement quality and speed on Alibaba's GPU trace (openb), through the extender's own decision code.

:mod:`benchmarks.trace` reads the CSVs, :mod:`benchmarks.protocol` builds one
run's arrival sequence and its metric as the FGD paper did,
:mod:`benchmarks.mapping` turns trace rows into Nodes and requests,
:mod:`benchmarks.kube` emulates kube-scheduler's part, :mod:`benchmarks.replay`
runs one seed, :mod:`benchmarks.matrix` many, and :mod:`benchmarks.report`
writes tables and plots. Figures and commands: ``benchmarks/RESULTS.md``.
"""
