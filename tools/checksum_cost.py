"""What the artifact check at every load costs: the fast checksum of every file the embedded
voice loads, hashed afresh (no per-process memory of intact files), page cache warm as it is
right after a build or a previous start. Medians with min-max over --runs; sha256 beside it for
comparison.

Run: .venv/bin/python tools/checksum_cost.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from daemon.config import parse_config
from daemon.runtime.artifacts import MANIFEST, fast_hash_file, sha256_file
from edge_build.build import build_voices


def timed(function, paths: list[Path], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        for path in paths:
            function(path)
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as store:
        config = parse_config({"runtime": {"precision": "fp32", "artifact_dir": store}})
        results = build_voices(config, Path(store))
        paths = [
            path
            for result in results
            for path in sorted(result.directory.iterdir())
            if path.name != MANIFEST
        ]
        size = sum(path.stat().st_size for path in paths)
        print(f"{len(paths)} files, {size / 2**20:.1f} MiB (the embedded voice, fp32 parts)")
        for name, function in (("xxh3_128", fast_hash_file), ("sha256", sha256_file)):
            times = timed(function, paths, args.runs)
            print(
                f"{name}: median {statistics.median(times) * 1000:.1f} ms "
                f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}) over {args.runs} runs"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
