"""The fuzz suite's helpers (cli_cases, harness) are imported by file name from this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
