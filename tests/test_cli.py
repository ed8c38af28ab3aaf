"""The CLI starts without heavy imports; every command has help with an example, rendered with
nothing lost to rich markup and mirrored in docs/cli.md; closed choices match the registries; the
run a command reads is its first argument, and the old spellings still work for one release."""

import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner


def test_help_is_instant_and_imports_nothing_heavy():
    heavy = {"torch", "docker", "datasets", "pyarrow", "duckdb", "git", "tree_sitter", "ray", "openai",
             "transformers", "matplotlib"}
    show_help = "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): app({})"
    for argv in (None, ["--help"], ["train", "--help"], ["sandbox", "exec", "--help"]):
        code = "\n".join(["import contextlib, io, sys", "from featdel.cli.main import app",
                          show_help.format(argv) if argv else "", f"print(sorted({heavy!r} & set(sys.modules)))"])
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "[]", (argv, out.stdout)


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


# --- The help as rendered, the closed choices, the old spellings, docs/cli.md ---------------------

def _commands():
    import typer.main

    from featdel.cli.docs import command_paths
    from featdel.cli.main import app

    group = typer.main.get_group(app)
    for path in command_paths(group):
        cmd = group
        for name in path:
            cmd = cmd.commands[name]
        yield path, cmd


def _plain(rendered: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", rendered).split())


def test_bracketed_text_survives_rich_markup_in_every_rendered_help():
    # Typer renders help with rich markup, which eats `[@rev]` or `[ray]` as tags unless written
    # `\[`. Whatever the source means to show in brackets must reach the screen, and no escape may.
    from featdel.cli.docs import help_text

    checked = 0
    for path, cmd in _commands():
        rendered = help_text(path, width=200)  # wide: no bracket is wrapped across table cells
        texts = [cmd.help or ""] + [p.help or "" for p in cmd.params if not getattr(p, "hidden", False)]
        for raw in texts:
            for span in re.findall(r"\[[^\]\n]*\]", raw.replace("\\[", "[")):
                checked += 1
                assert " ".join(span.split()) in _plain(rendered), f"featdel {' '.join(path)}: {span} is lost"
        assert "\\[" not in rendered, f"featdel {' '.join(path)}: a visible escape"
    assert checked >= 3
    mine = help_text(("mine",), width=200)
    assert "git URL[@rev]" in mine and "featdel[ray]" in mine


def test_dash_h_is_help_everywhere():
    from featdel.cli.main import app

    for path, _ in _commands():
        result = CliRunner().invoke(app, [*path, "-h"], prog_name="featdel")
        assert result.exit_code == 0 and "Usage: featdel" in result.output, path


def test_the_top_help_groups_commands_in_panels():
    from featdel.cli.docs import help_text

    top = help_text(())
    panels = ["Make tasks", "Inspect", "Grade and learn", "Share", "Setup"]
    assert [top.index(f"─ {p} ─") for p in panels] == sorted(top.index(f"─ {p} ─") for p in panels)
    assert "sandbox" in top  # registered without an ImportError guard that could hide it


def test_docs_cli_md_is_the_current_help():
    from pathlib import Path

    from featdel.cli.docs import render

    current = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    assert render() == current, "docs/cli.md is stale: python -m featdel.cli.docs > docs/cli.md"


def test_closed_choices_match_the_registries():
    from featdel.cli.options import SandboxName, StrategyName
    from featdel.cli.train import Preset
    from featdel.deletion.registry import STRATEGIES
    from featdel.sandboxes import BACKENDS
    from featdel.trainer.rl_presets import PRESETS

    assert [s.value for s in SandboxName] == list(BACKENDS)
    assert [s.value for s in StrategyName] == list(STRATEGIES)
    assert [p.value for p in Preset] == list(PRESETS)


def test_teacher_choices_match_the_trainer():
    pytest.importorskip("torch")
    from featdel.cli.train import Teacher
    from featdel.trainer.rl import TEACHERS

    assert tuple(t.value for t in Teacher) == TEACHERS


def test_a_choice_outside_the_set_is_a_usage_error():
    from featdel.cli.main import app

    for argv in (["evaluate", "r", "--predictions", "p", "--sandbox", "vm"], ["train", "r", "--preset", "huge"],
                 ["export", "r", "--format", "csv", "--out", "o"], ["delete", "r", "-s", "nope"]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2 and "Usage:" in result.output, argv


@pytest.mark.parametrize("new, old", [
    (["evaluate", "RUN", "--predictions", "p.jsonl"], ["evaluate", "--tasks", "RUN", "--predictions", "p.jsonl"]),
    (["solve", "RUN", "--policy", "ckpt"], ["solve", "--tasks", "RUN", "--policy", "ckpt"]),
    (["curriculum", "stats", "RUN"], ["curriculum", "stats", "--run", "RUN"]),
    (["curriculum", "sample", "RUN", "-n", "2"], ["curriculum", "sample", "-n", "2", "--run", "RUN"]),
    (["env", "build", "RUN", "--sandbox", "docker"], ["env", "build", "RUN", "--backend", "docker"]),
])
def test_old_spellings_still_work_and_say_they_are_deprecated(tmp_path, new, old):
    # A run that is not there: both spellings reach the same one-line library error.
    from featdel.cli.main import app

    run = str(tmp_path / "missing")
    a, b = (CliRunner().invoke(app, [run if x == "RUN" else x for x in argv]) for argv in (new, old))
    assert a.exit_code == b.exit_code != 0
    errors = [[line for line in r.stderr.splitlines() if line.startswith("error:")] for r in (a, b)]
    assert errors[0] and errors[0] == errors[1]
    assert "deprecated" in b.stderr and "deprecated" not in a.stderr


def test_record_takes_run_then_results_and_the_old_order(tmp_path):
    from featdel.cli.main import app

    results = tmp_path / "results.jsonl"
    results.write_text("")
    db = tmp_path / "a.duckdb"
    for argv in (["curriculum", "record", str(tmp_path), str(results), "--learner", "x", "--db", str(db)],
                 ["curriculum", "record", str(results), "--learner", "x", "--run", str(tmp_path), "--db", str(db)]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
        assert "0 new attempts of 0" in result.stdout


def test_run_given_twice_or_not_at_all_is_a_clear_usage_error(tmp_path):
    from featdel.cli.main import app

    both = CliRunner().invoke(app, ["evaluate", "a", "--tasks", "b", "--predictions", "p"])
    assert both.exit_code == 2 and "not both" in both.output
    neither = CliRunner().invoke(app, ["train"])
    assert neither.exit_code == 2 and "RUN" in neither.output and "missing" in neither.output
    twice = CliRunner().invoke(app, ["env", "build", "a", "--sandbox", "docker", "--backend", "local"])
    assert twice.exit_code == 2 and "--sandbox" in twice.output


def test_global_verbose_shows_the_traceback(tmp_path):
    from featdel.cli.main import app
    from featdel.core.errors import FeatdelError

    quiet = CliRunner().invoke(app, ["show", str(tmp_path / "missing")])
    assert quiet.exit_code == 2 and quiet.stderr.startswith("error:")
    loud = CliRunner().invoke(app, ["-v", "show", str(tmp_path / "missing")])
    assert isinstance(loud.exception, FeatdelError)
    again = CliRunner().invoke(app, ["show", str(tmp_path / "missing")])  # -v does not outlive its run
    assert again.exit_code == 2
