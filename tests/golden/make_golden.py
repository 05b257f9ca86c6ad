"""Write the golden vectors of a fingerprint profile.

Golden vectors freeze a profile: once committed, the implementation must
reproduce them forever.  This script only adds cases; it refuses to change
the fingerprint of a case that is already in the file, because that would
mean the profile itself changed (make a new profile version instead).

    python tests/golden/make_golden.py              # every profile of GOLDEN_PROFILES
    python tests/golden/make_golden.py english/1    # one profile
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python_client"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import nearsim

from cases import CASES, GOLDEN_PROFILES, expand, golden_path


def main(profile: str) -> None:
    path = golden_path(profile)
    existing: dict[str, dict[str, object]] = {}
    if path.exists():
        for line in path.read_text(encoding="ascii").splitlines():
            record = json.loads(line)
            existing[record["name"]] = record
    lines = []
    for case in CASES:
        value = nearsim.simhash(expand(case), profile)
        # The default profile's file holds the texts too; the others name them.
        record = dict(case) if profile == nearsim.PROFILE else {"name": case["name"]}
        record["simhash"] = value
        record["bits"] = None if value is None else nearsim.bits(value)
        old = existing.get(case["name"])
        if old is not None and old["simhash"] != value:
            raise SystemExit(
                f"{case['name']}: fingerprint changed from {old['simhash']} to {value}; "
                f"profile {profile} is frozen"
            )
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} cases written to {path}")


if __name__ == "__main__":
    for name in sys.argv[1:] or GOLDEN_PROFILES:
        main(name)
