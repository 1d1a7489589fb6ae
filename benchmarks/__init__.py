"""Placement quality and speed on Alibaba's GPU trace (openb), through the extender's own decision code.

:mod:`benchmarks.trace` reads the CSVs, :mod:`benchmarks.protocol` builds one
run's arrival sequence and its metric as the FGD paper did,
:mod:`benchmarks.mapping` turns trace rows into Nodes and requests,
:mod:`benchmarks.kube` emulates kube-scheduler's part, :mod:`benchmarks.placer`
places one pod through it and the extender's path, :mod:`benchmarks.replay`
runs one seed, :mod:`benchmarks.matrix` many, and :mod:`benchmarks.report`
writes tables and plots. The replay with churn — pods that arrive, wait and
leave, and defragmentation's moves — is :mod:`benchmarks.churn` (workload
:mod:`benchmarks.timeline`, figures :mod:`benchmarks.churn_stats`, runs and
tables :mod:`benchmarks.churn_matrix`). Figures and commands:
``benchmarks/RESULTS.md``.
"""
