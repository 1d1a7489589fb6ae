"""Run the extender as ``serve`` does, with limits a test chooses: ``python serve_runner.py SPEC_JSON``."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender.serving.application import ExtenderApplication, Listening  # noqa: E402
from extender.serving.budgets import Limits  # noqa: E402
from extender.serving.config import Config  # noqa: E402

spec = json.loads(sys.argv[1])
config = spec["config"]
config.setdefault("log_level", "info")
ExtenderApplication(Config(**config), Listening(**spec["where"]), Limits(**spec["limits"])).run()
