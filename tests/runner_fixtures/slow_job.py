"""A reproduction job that takes its time: it waits (printing lines the agent streams), then trains
the real reference benchmark. Config: the reference benchmark's, plus `sleep_seconds`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    config = json.loads(args.config.read_text())
    seconds = float(config.pop("sleep_seconds", 0))
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        print(f"waiting {time.monotonic() - start:.1f} s", flush=True)
        time.sleep(0.2)
    # Beside the log, in the attempt's work folder, which the agent removes (a file in /tmp outlived every run).
    trained = args.log.parent / "slow_job_config.json"
    trained.write_text(json.dumps(config))
    from podium_reference.digits import main as train

    return train(["--config", str(trained), "--log", str(args.log), "--device", "cpu"])


if __name__ == "__main__":
    sys.exit(main())
