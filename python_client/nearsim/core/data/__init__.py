"""Data files shipped with the package: calibration tables and stop-word lists.

They are installed next to the code on clients and in the server, so both
read the same files.
"""

from pathlib import Path

DATA_DIR = Path(__file__).parent
STOP_WORDS_DIR = DATA_DIR / "stopwords"
