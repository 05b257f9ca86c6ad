"""``nearsim spark``'s commands as the main program of ``spark-submit``.

    spark-submit --master yarn [spark options] "$(nearsim spark job-file)" \\
        dedup INPUT... --key-column url --text-column body -o groups.parquet

spark-submit starts the driver with the master and options it was given
and runs this file; the arguments after it are those of ``nearsim spark``.
The driver's Python needs the nearsim package installed (docs/SPARK.md).
"""

import sys
from pathlib import Path


def main() -> None:
    """Run the command line of ``nearsim spark`` under spark-submit's session."""
    # Python put this file's directory first on the path; its modules
    # (search, graph, runtime...) must not shadow top-level ones.
    here = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    from nearsim.client.sparkcli import spark_group

    spark_group(prog_name="nearsim spark")


if __name__ == "__main__":
    main()
