"""The pure placement core: numpy arrays in, decisions out.

No HTTP, no Kubernetes client, no clock, no global state. See
:mod:`policy.placement` for the one-pass evaluation and :mod:`policy.scoring`
for the node scoring strategies.
"""
