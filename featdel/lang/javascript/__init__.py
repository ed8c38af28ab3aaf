"""JavaScript and TypeScript as a `featdel.lang.base.Language`: one language, since a TypeScript
repository's tests, tools and exports are JavaScript's and most packages mix both.

In: a tree, files, an env. Out: what `Language` promises. Sources, syntax and symbols come from
`syntax` (tree-sitter), the strategies' edits from `edits` and `exports`; environments, test
runs and coverage from `envs`, `runners` and `coverage`, imported only when called (they bring
npm and the sandbox). A repository is JavaScript when it has a `package.json`, JS or TS sources,
and no Python packaging (`pyproject.toml`, `setup.py`, `setup.cfg`): a Python project that ships
a little JavaScript stays Python.
"""

from __future__ import annotations

import re
from pathlib import Path

from featdel.lang.base import Edit, LeakChannel, StubBody, Symbol, TamperPattern, TamperRule, Wired
from featdel.lang.javascript import edits, exports, folding, syntax

# Runner, transpiler, module-system and install configuration: always the task's.
PROTECTED_NAMES = frozenset({"package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
                             ".npmrc", ".yarnrc", ".yarnrc.yml", ".nvmrc", ".node-version", ".babelrc", ".swcrc",
                             "jsconfig.json", ".taprc", ".gitattributes"})
PROTECTED_PATTERN = re.compile(
    r"^(?:(?:jest|vitest|vite|babel|ava|karma|playwright|webpack|rollup)\.config(?:\.[\w-]+)*\.(?:[cm]?[jt]s|json)"
    r"|vitest\.(?:workspace|projects)\.[\w.]+|\.mocharc(?:\.[\w]+)?|\.babelrc\.[\w]+|tsconfig(?:\.[\w-]+)*\.json"
    r"|\.c8rc(?:\.json)?|\.nycrc(?:\.[\w]+)?)$")
PYTHON_PACKAGING = ("pyproject.toml", "setup.py", "setup.cfg")

LEAK_CHANNELS = (
    LeakChannel(where="tree", glob="node_modules/**", why="installed dependencies: a copy of the package itself "
                "(a dependency that depends back on it, a nested install)"),
    LeakChannel(where="env", glob="**/_cacache/**", why="npm's cache keeps every tarball it fetched, the package's own"),
    LeakChannel(where="tree", glob="dist/**", why="built output of the sources"),
    LeakChannel(where="tree", glob="build/**", why="built output of the sources"),
    LeakChannel(where="tree", glob="**/*.map", why="source maps carry the original source (`sourcesContent`)"),
    LeakChannel(where="tree", glob="**/*.d.ts", why="published declarations: signatures and doc comments"),
    LeakChannel(where="tree", glob="coverage/**", why="coverage reports embed the source they measured"),
    LeakChannel(where="tree", glob=".git/**", why="history holds every version of the deleted code"),
)


def _p(rule: str, pattern: str, why: str) -> TamperPattern:
    return TamperPattern(rule=rule, pattern=re.compile(pattern), why=why, fold=folding.fold)


TAMPER_PATTERNS = (
    _p("process-exit", r"\bprocess\s*\.\s*(?:exit|abort|kill|reallyExit|exitCode)\b|\bprocess\s*\[",
       "ends the process or sets its status"),
    _p("exit-hook", r"\bprocess\s*\.\s*(?:on|once|addListener|prependListener|setUncaughtExceptionCaptureCallback)"
       r"\s*\(\s*['\"`](?:exit|beforeExit|uncaughtException|unhandledRejection)",
       "registers code for exit or errors"),
    _p("sys-modules", r"\brequire\s*\.\s*(?:cache|extensions|main)\b|\bModule\s*\.\s*_|\bmodule\s*\.\s*constructor\b"
       r"|\b_resolveFilename\b|\b_compile\b|\bmodule\s*\.\s*(?:children|parent)\b",
       "reaches the module loader"),
    _p("runner-name", r"\b(?:jest|vitest|mocha|tape|ava|__vitest\w*|__jest\w*)\b|@jest/|node:test\b|\bexpect\s*\.\s*"
       r"(?:extend|addSnapshotSerializer)\b|\bSymbol\s*\.\s*for\s*\(\s*['\"`]\$\$jest",
       "names a test runner or its internals"),
    _p("runner-name", r"\b(?:globalThis|global|window|self)\s*(?:\.\s*|\[\s*['\"`])(?:describe|it|test|expect|assert"
       r"|before|after|beforeEach|afterEach|beforeAll|afterAll|suite|setup|teardown)\b",
       "rebinds the test API on the global object"),
    _p("report-name", r"(?i)featdel|(?<![\w-])report-(?:[0-9a-f]{6,}|\$\{)", "names featdel or its report"),
    _p("const-eq", r"\basymmetricMatch\b|\bSymbol\s*\.\s*(?:hasInstance|toPrimitive)\b",
       "an object a matcher compares equal to anything"),
    _p("builtins-write", r"\b(?:Object|Array|Function|String|Number|Boolean|Promise|Error|Symbol|RegExp|Map|Set)"
       r"\s*\.\s*prototype\s*(?:\.\s*[\w$]+|\[[^\]]*\])\s*=(?!=)|__proto__|\bObject\s*\.\s*(?:defineProperty|"
       r"setPrototypeOf|assign)\s*\(\s*(?:globalThis|global|Object\.prototype|Array\.prototype)\b",
       "writes a built-in prototype or the global object"),
    _p("subprocess", r"\bchild_process\b|\bworker_threads\b|\bcluster\b|\bprocess\s*\.\s*(?:binding|dlopen|_linkedBinding)",
       "starts processes or loads native code"),
    _p("dynamic-code", r"\beval\s*\(|\bnew\s+Function\b|\bFunction\s*\(|['\"`](?:node:)?vm['\"`]",
       "runs code built at run time"),
    _p("tracing", r"['\"`](?:node:)?(?:inspector|v8|async_hooks|trace_events)['\"`]|\bprocess\s*\.\s*_getActive",
       "inspects the running process"),
    _p("cache-path", r"\bnode_modules\b|(?<![\w.])\.git(?![\w-])|\b_cacache\b|\.npm\b|\.map['\"`]",
       "names installed packages, caches or history, where a copy of the original may be"),
    _p("dynamic-import", r"\b(?:import|require)\s*\(\s*(?!['\"][^'\"`$\\]*['\"]\s*[,)])|\bcreateRequire\b"
       r"|\b(?:module|require)\s*\.\s*(?:require|resolve)\b",
       "loads a module by a name built at run time"),
    _p("foreign-attr-write", r"[\w$]+\s*(?:\.\s*[\w$]+\s*)+\.\s*prototype\s*(?:\.\s*[\w$]+|\[[^\]]*\])\s*=(?!=)"
       r"|\b(?:Object\s*\.\s*(?:defineProperty|defineProperties|assign|setPrototypeOf)|Reflect\s*\.\s*(?:set|"
       r"defineProperty))\s*\(\s*[\w$]+\s*(?:\.\s*[\w$]+\s*)+\.\s*prototype\b",
       "writes a prototype of another module's class (an assertion library's check made a no-op)"),
    _p("tracing", r"['\"`]/proc\b|\bprocess\s*\.\s*ppid\b", "reads the running processes (another's memory)"),
    _p("runner-name", r"\b(?:beforeEach|afterEach|beforeAll|afterAll|onTestFinished|onTestFailed|getCurrentTest"
       r"|currentTest|setupFiles)\b|\.\s*(?:fails|failing)\s*=(?!=)|\b(?:before|after)\s*\.\s*(?:call|apply)\b",
       "reaches the runner's hooks or the current test from the library"),
    _p("process-exit", r"(?:(?<![}\s])\s*=|[(\[,:?]|\breturn)\s*process\s*(?:[;,)\]}]|$)"
       r"|\{[^}]*\b(?:exit|abort|kill|reallyExit|exitCode|binding|dlopen|_linkedBinding)\b[^}]*\}\s*=\s*process\b",
       "takes the process object as a value (an alias hides what is called on it)"),
    _p("runner-name", r"(?:\bObject\s*\.\s*(?:keys|getOwnPropertyNames|getOwnPropertySymbols|getOwnPropertyDescriptors"
       r"|entries|values)|\bReflect\s*\.\s*ownKeys)\s*\(\s*(?:globalThis|global|window|self)\b"
       r"|\bin\s+(?:globalThis|global)\b|(?<![\w$.])(?<!typeof )globalThis\s*(?:[;,)\]}]|$)"
       r"|(?<![\w$.])(?:globalThis|global)\s*\["
       r"|\b(?:fails|failing)\s*:\s*(?:true|!0|1)\b",
       "walks or indexes the global object, where the runner keeps its state"),
    _p("foreign-attr-write", r"\brequire\s*\([^)]*\)\s*(?:\.\s*[\w$]+\s*|\[[^\]]*\]\s*)+=(?!=)",
       "writes to a module it requires"),
    TamperRule(rule="foreign-attr-write", find=folding.module_writes),
    _p("startup-hook", r"\bNODE_OPTIONS\b|--(?:require|import|loader|experimental-loader)\b|\bsetupFiles\w*\b"
       r"|\.mocharc|jest\.config|vitest\.config|\.pnp\.c?js",
       "names a start-up hook or runner configuration"),
)


class JavaScriptEdits:
    """featdel.lang.base.Edits for JavaScript and TypeScript (featdel.lang.javascript.edits and exports)."""

    labels = edits.LABELS

    def stub_body(self, symbol: Symbol, source: bytes) -> str:
        return edits.stub_body(symbol, source)

    def stub_variants(self, symbol: Symbol, source: bytes) -> list[StubBody]:
        return edits.stub_variants(symbol, source)

    def body_splice(self, symbol: Symbol, source: bytes, text: str):
        return edits.body_splice(symbol, source, text)

    def stub(self, source: bytes, found: list[Symbol]) -> Edit:
        return edits.stub(source, found)

    def remove(self, source: bytes, found: list[Symbol]) -> Edit:
        return edits.remove(source, found)

    def wired_removal(self, files, home: str, found: list[Symbol]) -> Wired:
        if found[0].kind == "method":
            return Wired()  # a method travels with its class: nothing exports it alone
        return exports.wired_removal(files, home, found)

    def importers(self, files, rel: str) -> list[str]:
        return exports.importers(files, rel)


class JavaScript:
    name = "javascript"
    suffixes = syntax.SUFFIXES
    edits = JavaScriptEdits()
    leak_channels = LEAK_CHANNELS
    tamper_patterns = TAMPER_PATTERNS

    def detect(self, tree: Path) -> bool:
        tree = Path(tree)
        if not (tree / "package.json").is_file() or any((tree / n).exists() for n in PYTHON_PACKAGING):
            return False
        return any(syntax.is_source(p.relative_to(tree).as_posix()) for p in syntax.walk(tree))

    def source_files(self, root: Path) -> list[Path]:
        return syntax.source_files(Path(root))

    def is_test_path(self, rel: str) -> bool:
        return syntax.is_test_path(rel)

    def parse(self, source: bytes, path: str):
        return syntax.parse(source, path)

    def symbols(self, source: bytes, path: str) -> list[Symbol]:
        return syntax.symbols(source, path)

    def has_syntax_error(self, source: bytes, path: str) -> bool:
        return syntax.has_syntax_error(source, path)

    def is_protected_name(self, name: str) -> bool:
        return name in PROTECTED_NAMES or PROTECTED_PATTERN.match(name) is not None

    def protected_files(self, tree: Path) -> set[str]:
        tree, found = Path(tree), set()
        stack = [tree]
        while stack:
            folder = stack.pop()
            for entry in sorted(folder.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    if entry.name not in syntax.SKIP:
                        stack.append(entry)
                elif self.is_protected_name(entry.name):
                    found.add(entry.relative_to(tree).as_posix())
        return found

    quiet_args = ()  # the runners' failure output is not where a run's time goes
    continue_args = ()  # every runner goes on past a file that fails to load, and records it
    coverage_name = "v8"  # a directory of V8 coverage files

    def dialect(self, tree: Path) -> str:
        """"typescript" when the tree has a tsconfig.json or its library is written in TypeScript."""
        tree = Path(tree)
        if (tree / "tsconfig.json").is_file():
            return "typescript"
        library = [p for p in syntax.source_files(tree) if not syntax.is_test_path(p.relative_to(tree).as_posix())]
        typed = sum(1 for p in library if syntax.is_typescript(p.name))
        return "typescript" if library and typed * 2 > len(library) else self.name

    def recipe(self, tree: Path):
        from featdel.lang.javascript import envs

        return envs.recipe(Path(tree))

    def build_env(self, source, recipe, *, tree_ready: Path | None = None):
        from featdel.lang.javascript import envs

        return envs.build_env(source, recipe, tree_ready=tree_ready)

    def load_env(self, root: Path):
        from featdel.lang.javascript import envs

        return envs.load(Path(root))

    def install_files(self, env_root: Path) -> list[dict]:
        from featdel.lang.javascript import rebuild

        return rebuild.install_files(Path(env_root))

    def rebuild_env(self, row, backend: str) -> tuple[str, bool]:
        from featdel.lang.javascript import rebuild

        return rebuild.build_local(row) if backend == "local" else rebuild.build_image(row)

    def image_env(self, row):
        from featdel.lang.javascript import rebuild

        return rebuild.image_env(row)

    def repo_image(self, env) -> str:
        from featdel.lang.javascript import runners
        from featdel.sandboxes.images import build_node_repo_image

        runners.reporter_dir(env)  # the reporters live in the env, so they travel in the image
        return build_node_repo_image(env.root, node=Path(env.node))

    def runner(self, env, backend, image: str | None = None, *, warm: bool = True):
        from featdel.lang.javascript import runners

        return runners.NodeRunner(env, backend, image=image, warm=warm)

    def sandbox_readonly(self, env) -> tuple[Path, ...]:
        from featdel.lang.javascript import runners

        if getattr(env, "in_image", False):  # its node_modules are the image's
            return (runners.reporter_dir(env),)
        return (env.node_modules, runners.reporter_dir(env))

    def removed_names(self, original: Path, edits: dict[str, str | None]) -> set[str]:
        from featdel.lang.javascript import buildcheck

        return buildcheck.removed_names(Path(original), edits)

    def build_check(self, env, collected, tree, runner, deleted_files, deleted_names=frozenset(),
                    allowed_out=None, baseline_errors=frozenset()):
        from featdel.lang.javascript import buildcheck

        return buildcheck.build_check(env, collected, tree, runner, deleted_files, deleted_names, allowed_out,
                                      baseline_errors)

    def build_check_and_run(self, env, collected, tree, runner, deleted_files, deleted_names=frozenset(),
                            allowed_out=None, baseline_errors=frozenset(), run=None):
        # mocha, vitest and node --test list tests in their own run: the first selection runs apart
        return self.build_check(env, collected, tree, runner, deleted_files, deleted_names, allowed_out,
                                baseline_errors), None

    def coverage_map(self, src: Path, package_dirs: list[str], data: Path, allowed: set[str]):
        from featdel.lang.javascript import coverage

        return coverage.coverage_map(src, package_dirs, data, allowed)

    def plant_canaries(self, tree: Path, fail_to_pass: list[str], env, held: list = ()) -> list[tuple[str, str, str]]:
        from featdel.lang.javascript import canaries

        return canaries.plant(tree, fail_to_pass, env.runner, held=held)

    def capture_held_out(self, tree: Path, fail_to_pass: list[str], env):
        from featdel.lang.javascript import held_out

        return held_out.capture(tree, fail_to_pass, env.runner, env.src)


LANGUAGE = JavaScript()
