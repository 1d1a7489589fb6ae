"""Write the GPU map's screenshot (docs/gpu-map.png) from the cluster its browser test renders.

    .venv/bin/python tests/gpu_map_screenshot.py [PATH]     (default: docs/gpu-map.png)

Serves benchmarks/operator_cluster.py's 1,000 nodes (10 pools, 40 pending pods) with
``cgpu-extender serve --cluster``, lets it learn the load driver's pod shapes
(so stranded GPUs are measured), opens the map in headless Chromium at
1440 × 900, sorted by stranded share, with the first node selected, and saves
the page. Run by hand when the page changes; tests never write into the
repository.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the package before tests/policy, which this directory would put first

from browser import Browser, chromium  # noqa: E402
from demo_server import serving  # noqa: E402
from benchmarks.operator_cluster import learn_mix, operator_objects, write_cluster  # noqa: E402


def main(argv: list) -> int:
    target = Path(argv[0]) if argv else ROOT / "docs" / "gpu-map.png"
    if chromium() is None:
        print("gpu_map_screenshot: Debian's chromium is not installed (./dev test installs it as root)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cgpu-map-") as scratch:
        path = write_cluster(Path(scratch) / "cluster.json", operator_objects(1000, pending=40))
        with serving("--cluster", path, start_seconds=120) as url, Browser(width=1440, height=900) as browser:
            learn_mix(url)
            browser.open(f"{url}/ui?sort=stranded&refresh=60000")
            browser.wait_for("document.querySelectorAll('#nodeRows tr').length > 0 && "
                             "!!document.querySelector('#pending tr[data-pod]')", timeout=60, what="the map")
            browser.evaluate("document.querySelector('#nodeRows tr .gpu.stranded').click()")
            browser.wait_for("!!document.querySelector('#details tr[data-pod]')", what="the selected node's pods")
            browser.screenshot(target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
