"""The extender served as ``serve`` serves it, with limits ``serve`` has no flags for (tests, benchmarks).

    python -m benchmarks.limited_server '{"config": {...}, "where": {...}, "limits": {...}}'

``config`` are :class:`extender.serving.config.Config` fields, ``where`` those of
:class:`extender.serving.application.Listening`, ``limits`` those of
:class:`extender.serving.budgets.Limits`.
"""

import json
import sys

from extender.serving.application import ExtenderApplication, Listening
from extender.serving.budgets import Limits
from extender.serving.config import Config


def main(argv=None) -> None:
    spec = json.loads((argv or sys.argv[1:])[0])
    config = {"log_level": "info", **spec["config"]}
    ExtenderApplication(Config(**config), Listening(**spec["where"]), Limits(**spec["limits"])).run()


if __name__ == "__main__":
    main()
