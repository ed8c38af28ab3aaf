"""Python as a `featdel.lang.base.Language`, by delegation to the functions featdel has always used.

In and out: what `Language` promises. Sources, tests and symbols are `featdel.code.spans`', the
recipe `featdel.env.recipe.detect`, the environment `featdel.env.envs.build`, the runner
`featdel.env.testrun.warm_runner` and the coverage map `featdel.code.coverage_map.build`, so
Python's behaviour is exactly what it was before the seam. Its edits are the deletion layer's
own (`edits = None`: featdel/deletion/splice, body, wiring, equal_stub), and its tamper scan is
the grader's syntax-tree analysis (featdel.grading.tamper), not patterns: `tamper_patterns` is
empty. The names a patch never changes live here, where the grader reads them.
"""

from __future__ import annotations

from pathlib import Path

from featdel.code import spans
from featdel.lang.base import LeakChannel, Symbol

# Files whose content always comes from the task, whatever the patch does to them.
# Every file name pytest reads as configuration (pytest 9 adds pytest.toml and .pytest.toml).
PROTECTED_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml",
                             "setup.cfg", "tox.ini", "setup.py", ".coveragerc", "sitecustomize.py", "usercustomize.py",
                             ".gitattributes"})
# Folders whose files describe installed distributions (entry points name pytest plugins).
PROTECTED_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")

LEAK_CHANNELS = (
    LeakChannel(where="tree", glob=".git/**", why="history holds every version of the deleted code"),
    LeakChannel(where="tree", glob="**/__pycache__/**", why="bytecode compiled from the original"),
    LeakChannel(where="tree", glob="build/**", why="built output of the sources"),
    LeakChannel(where="tree", glob="*.egg-info/**", why="packaging metadata (SOURCES.txt, sometimes more)"),
    LeakChannel(where="env", glob="venv/lib/python*/site-packages/**",
                why="installed distributions: another copy of the package, vendored copies (setuptools/_vendor)"),
    LeakChannel(where="env", glob="**/ensurepip/_bundled/*.whl", why="the interpreter's bundled wheels vendor libraries"),
)


class Python:
    name = "python"
    suffixes = (".py",)
    edits = None  # featdel/deletion's own edits (see the module docstring)
    leak_channels = LEAK_CHANNELS
    tamper_patterns = ()  # featdel.grading.tamper reads Python's syntax tree

    def detect(self, tree: Path) -> bool:
        tree = Path(tree)
        return any((tree / n).exists() for n in ("pyproject.toml", "setup.py", "setup.cfg")) or \
            bool(spans.python_files(tree))

    def source_files(self, root: Path) -> list[Path]:
        return spans.python_files(Path(root))

    def is_test_path(self, rel: str) -> bool:
        return spans.is_test_path(rel)

    def parse(self, source: bytes, path: str):
        return spans.parse(source)

    def symbols(self, source: bytes, path: str) -> list[Symbol]:
        return spans.symbols(source, path)

    def has_syntax_error(self, source: bytes, path: str) -> bool:
        return spans.has_syntax_error(source)

    def is_protected_name(self, name: str) -> bool:
        return name in PROTECTED_NAMES or name.endswith(".pth") or name.endswith(PROTECTED_SUFFIXES)

    def protected_files(self, tree: Path) -> set[str]:
        tree = Path(tree)
        found = set()
        for path in tree.rglob("*"):
            rel = path.relative_to(tree)
            if ".git" in rel.parts or "node_modules" in rel.parts:
                continue
            if any(self.is_protected_name(part) for part in rel.parts):
                found.add(rel.as_posix())
        return found

    continue_args = ("--continue-on-collection-errors",)
    quiet_args = ("--tb=line",)
    coverage_name = "coverage.sqlite"

    def dialect(self, tree: Path) -> str:
        return self.name

    def recipe(self, tree: Path):
        from featdel.env.recipe import detect

        return detect(Path(tree))

    def build_env(self, source, recipe, *, tree_ready: Path | None = None):
        from featdel.env.envs import build

        return build(source, recipe, tree_ready=tree_ready)

    def load_env(self, root: Path):
        from featdel.env.envs import load

        return load(Path(root))

    def install_files(self, env_root: Path) -> list[dict]:
        return []

    def rebuild_env(self, row, backend: str) -> tuple[str, bool]:
        from featdel.env import envbuild

        return envbuild.build_local(row) if backend == "local" else envbuild.build_image(row)

    def image_env(self, row):
        from featdel.env.envbuild import image_env

        return image_env(row)

    def repo_image(self, env) -> str:
        from featdel.env.testrun import plugin_dir
        from featdel.sandboxes.images import build_repo_image

        plugin_dir(env)  # the report plugin lives in the env, so it travels in the image
        return build_repo_image(env.root, python_prefix=env.python_prefix)

    def runner(self, env, backend, image: str | None = None, *, warm: bool = True):
        from featdel.env.testrun import SuiteRunner, warm_runner

        return warm_runner(env, backend, image) if warm else SuiteRunner(env, backend, image=image, warm=False)

    def sandbox_readonly(self, env) -> tuple[Path, ...]:
        from featdel.env.testrun import suite_readonly

        return suite_readonly(env)

    def removed_names(self, original: Path, edits: dict[str, str | None]) -> set[str]:
        from featdel.code.gone import deleted_names
        from featdel.code.imports import module_name

        paths = {p.relative_to(original).as_posix() for p in Path(original).rglob("*.py")}
        return deleted_names(lambda rel: (original / rel).read_bytes(), edits, lambda rel: module_name(rel, paths))

    def build_check(self, env, collected, tree, runner, deleted_files, deleted_names=frozenset(),
                    allowed_out=None, baseline_errors=frozenset()):
        from featdel.env.buildcheck import build_check

        # pytest's baseline collection errors are --ignore'd in the env's test command already
        return build_check(env, collected, tree, runner, deleted_files, deleted_names, allowed_out)

    def build_check_and_run(self, env, collected, tree, runner, deleted_files, deleted_names=frozenset(),
                            allowed_out=None, baseline_errors=frozenset(), run=None):
        from featdel.env.buildcheck import check_and_run

        return check_and_run(env, collected, tree, runner, deleted_files, deleted_names, allowed_out, run)

    def coverage_map(self, src: Path, package_dirs: list[str], data: Path, allowed: set[str]):
        from featdel.code.coverage_map import build

        return build(src, package_dirs, data, allowed)

    def plant_canaries(self, tree: Path, fail_to_pass: list[str], env, held: list = ()) -> None:
        return None  # the grader's own (featdel.grading.canaries: twins and variants too)

    def capture_held_out(self, tree: Path, fail_to_pass: list[str], env) -> None:
        return None


LANGUAGE = Python()
