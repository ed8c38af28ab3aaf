"""The CLI starts without heavy imports and every command has help with an example."""

import subprocess
import sys


def test_help_is_instant_and_imports_nothing_heavy():
    code = (
        "import sys; from featdel.cli.main import app; "
        "heavy = {'torch', 'docker', 'datasets', 'pyarrow', 'duckdb', 'git', 'tree_sitter', 'ray', 'openai', 'transformers'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_command_has_help_with_an_example_and_is_in_the_readme():
    from pathlib import Path

    import typer.main

    from featdel.cli.main import app

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    group = typer.main.get_group(app)
    names = []
    for name, cmd in group.commands.items():
        subs = getattr(cmd, "commands", None)
        names += [(f"{name} {sub}", c) for sub, c in subs.items()] if subs else [(name, cmd)]
    assert len(names) >= 8
    for name, cmd in names:
        assert cmd.help and "featdel " in cmd.help and "xample" in cmd.help, f"{name}: help lacks an example"
        if name != "version":
            assert f"featdel {name}" in readme, f"README does not mention `featdel {name}`"


def test_threshold_overrides_parse_and_reject_unknown_keys():
    import pytest

    from featdel.cli.options import thresholds_from
    from featdel.core.errors import FeatdelError

    t = thresholds_from(["min_passing=5", "min_coverage=12.5"])
    assert (t.min_passing, t.min_coverage, t.baseline_runs) == (5, 12.5, 3)
    with pytest.raises(FeatdelError, match="KEY one of"):
        thresholds_from(["min_pasing=5"])
