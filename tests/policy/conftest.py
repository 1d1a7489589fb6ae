"""The policy tests' helpers (clusters, plans, defrag_reference) importable from its subfolders too."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
