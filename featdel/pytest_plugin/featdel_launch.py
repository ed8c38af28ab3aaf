"""Start pytest for featdel with the report plugin loaded as an object, not by name.

Run as `python featdel_launch.py PYTEST_ARGS...` from a read-only directory outside the tree, with
$FEATDEL_REPORT naming the report file. Why a launcher rather than `python -m pytest -p
featdel_report`: `-m` puts the working directory (the tree under test) first on sys.path, so a
`featdel_report.py` or `pytest.py` in the tree would replace ours; and the report's location
stayed in the environment, where code under test could read it and rewrite the report at exit.
Here the plugin and pytest are imported from our directory and the venv before the tree joins
sys.path, and the location leaves the environment before any test code runs.
This file runs inside the sandbox with the repository's interpreter: standard library only.
"""

import os
import sys


def main() -> int:
    report = os.environ.pop("FEATDEL_REPORT", "")
    import featdel_report  # sys.path[0] is this file's read-only directory
    import pytest

    # From here on the tree is where `python -m pytest` would put it: first on sys.path.
    sys.path[0] = os.getcwd()
    featdel_report.configure(report)
    return int(pytest.main(sys.argv[1:], plugins=[featdel_report]))


if __name__ == "__main__":
    sys.exit(main())
