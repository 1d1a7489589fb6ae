import os
import sys

from hypothesis import HealthCheck, settings

# Every folder of tests/ on the path: a helper (builders, fakekube, kubesteps, clusters...) or a test module
# another test borrows from is imported by its basename, from whichever folder (basenames are unique).
for folder, subfolders, _ in os.walk(os.path.dirname(os.path.abspath(__file__))):
    subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "__")))
    sys.path.insert(0, folder)

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
