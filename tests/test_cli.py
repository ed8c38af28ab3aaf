"""The CLI starts without heavy imports and every command has help with an example."""

import subprocess
import sys


def test_help_is_instant_and_imports_nothing_heavy():
    code = (
        "import sys; from featdel.cli import app; "
        "heavy = {'torch', 'docker', 'datasets', 'pyarrow', 'duckdb', 'git', 'tree_sitter'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
