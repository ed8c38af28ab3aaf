"""One node_modules per repo@commit@recipe, built once and reused: JavaScript's environments.

In: a `PinnedSource` and a `Recipe` (`recipe(tree)` works one out from package.json). Out: a
`NodeEnv` whose `src/` holds the tree at the commit (no VCS data) and whose `node_modules/`
beside it holds the locked install. The install goes outside the tree on purpose: Node resolves
a module by walking up from the file that asks (src/lib/x.js looks in src/node_modules, then
the env root's node_modules), so the tree under test, the learner's copies of it and the
grader's start states never carry the dependencies, and a test run shows them read-only.

The same cache layout as Python's (featdel.env.envs): the directory is keyed by repo, commit and
recipe, a `ready.json` marker written last makes a half-built env count as missing, and the
content-addressed `env_id` (repo, commit, lock) links to it. The install is lockfile-exact:
`npm ci --ignore-scripts` when the tree has a package-lock.json (or npm-shrinkwrap.json),
otherwise `npm install --package-lock-only` resolves one first; the lock npm used stays in the
env root, and `recipe.lock` lists `node@VERSION` (the runtime) and `PATH@VERSION` for every
package in it, so two machines that install the same tree agree on the id. Installs run on the
host with the network and no install scripts; tests never get the network (featdel.lang.
javascript.runners).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

from featdel.core.errors import EnvBuildError
from featdel.core.records import Recipe
from featdel.env.sources import PinnedSource, cache_root, checkout

RUNNERS = ("mocha", "jest", "vitest", "node-test", "tape")
LOCKS = ("npm-shrinkwrap.json", "package-lock.json")
# Other managers' locks: npm cannot install from them, and the trees they lock were resolved
# without npm's peer rules (pnpm and yarn warn where npm 7+ refuses: unjs/defu's unbuild wants
# typescript 5 beside its typescript 6), so npm resolves such a tree with --legacy-peer-deps.
FOREIGN_LOCKS = ("pnpm-lock.yaml", "yarn.lock", "bun.lockb", "bun.lock")
# Tried in this order when the test script names no runner.
_BY_DEPENDENCY = (("vitest", "vitest"), ("jest", "jest"), ("mocha", "mocha"), ("tape", "tape"))
# Words before the runner in a test script that only wrap it (coverage tools, env setters).
_WRAPPERS = {"npx", "nyc", "c8", "cross-env", "env", "dotenv", "istanbul", "time", "npm-run-all", "exec"}
# node options that go to the interpreter, with whether they take a value.
_NODE_FLAGS = {"--import": True, "--require": True, "-r": True, "--loader": True, "--experimental-loader": True,
               "--conditions": True, "-C": True, "--enable-source-maps": False, "--no-warnings": False,
               "--expose-gc": False, "--experimental-vm-modules": False, "--experimental-strip-types": False}
_SOURCE_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")
_NOT_SOURCES = {"test", "tests", "__tests__", "spec", "node_modules", "docs", "doc", "example", "examples",
                "bench", "benchmark", "benchmarks", "scripts", "coverage", "dist", "build", "fixtures"}


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeEnv:
    root: Path
    recipe: Recipe

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def node_modules(self) -> Path:
        return self.root / "node_modules"

    @property
    def runner(self) -> str:
        return self.recipe.test_cmd[0]

    @property
    def node(self) -> str:
        """The node binary a run starts: the host's, at its own path (a per-repo image holds it there)."""
        return node_binary()

    def environ(self) -> dict[str, str]:
        """Variables for running the repo's tests in this environment."""
        return {
            "PATH": f"{self.node_modules / '.bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root / "home"),
            "LANG": "C.UTF-8",
            "CI": "1",  # no interactive reporters, no watch prompts
            "NO_COLOR": "1",
            "FORCE_COLOR": "0",
        }


def recipe(tree: Path) -> Recipe:
    """How to install `tree` and run its tests: the runner and its arguments from package.json's
    test script (or the runner it depends on), `npm ci` with or without a lock."""
    pkg = _package(tree)
    runner, args = test_command(pkg)
    has_lock = any((tree / name).is_file() for name in LOCKS)
    npm = ["npm", "--no-audit", "--no-fund", "--ignore-scripts"]
    if not has_lock and any((tree / name).is_file() for name in FOREIGN_LOCKS):
        npm.append("--legacy-peer-deps")
    install = [[*npm, "ci"]] if has_lock else [[*npm, "install", "--package-lock-only"], [*npm, "ci"]]
    deps = {**(pkg.get("dependencies") or {}), **(pkg.get("devDependencies") or {})}
    if runner == "jest" and any((tree / f"jest.config.{x}").is_file() for x in ("ts", "mts", "cts")) and not (
            {"ts-node", "esbuild-register"} & deps.keys()):
        # jest reads a TypeScript config only through ts-node, an optional peer that npm leaves
        # out and pnpm installs (vercel/ms): it goes into the env's copy of package.json and lock
        install.insert(len(install) - 1, [*npm, "install", "--package-lock-only", "--save-dev", "ts-node@10"])
    return Recipe(python="", install=install, test_cmd=[runner, *args], package_dirs=source_roots(tree))


def test_command(pkg: dict) -> tuple[str, list[str]]:
    """(runner, its arguments) from a package.json: the first part of `scripts.test` that runs a
    known runner (after wrappers such as nyc, c8 or cross-env, through `npm run NAME`), else the
    runner among the dependencies, else node's own. node-test's arguments keep node's flags
    (`--import tsx`); `node test/index.js` in a package that depends on tape is tape on that file."""
    scripts = pkg.get("scripts") or {}
    deps = {**(pkg.get("dependencies") or {}), **(pkg.get("devDependencies") or {})}
    found = _from_script(str(scripts.get("test") or ""), scripts, deps, depth=0)
    if found is not None:
        return found
    for name, runner in _BY_DEPENDENCY:
        if name in deps:
            return runner, []
    return "node-test", []


def _from_script(script: str, scripts: dict, deps: dict, depth: int) -> tuple[str, list[str]] | None:
    for part in re.split(r"&&|\|\||;", script):
        words = _words(part.split("|", 1)[0])
        while words and (words[0] in _WRAPPERS or re.match(r"^\w+=", words[0]) or
                         (words[0].startswith("-") and words[0] != "--test")):
            words = words[1:]
        if not words:
            continue
        head, rest = Path(words[0]).name, words[1:]
        if head in ("npm", "yarn", "pnpm", "bun") and depth < 4:
            named = [w for w in rest if not w.startswith("-") and w not in ("run", "run-script", "--")]
            if named and named[0] in scripts:
                inner = _from_script(str(scripts[named[0]]), scripts, deps, depth + 1)
                if inner is not None:
                    return inner
            elif named and head != "npm" and rest[0] != "run":
                # `pnpm vitest run`, `yarn jest`, `pnpm exec mocha`: a binary, not a script
                words = rest[1:] if rest[0] in ("exec", "dlx") else rest
                inner = _from_script(shlex.join(words), scripts, deps, depth + 1)
                if inner is not None:
                    return inner
            continue
        if head in ("mocha", "_mocha"):
            return "mocha", rest
        if head in ("jest", "vitest", "tape"):
            return head, [w for w in rest if w != "run"] if head == "vitest" else rest
        if head in ("node", "tsx") and "--test" in rest:
            flags = ["--import", "tsx"] if head == "tsx" else []
            return "node-test", flags + [w for w in rest if w != "--test" and not w.startswith("--test-")]
        if head == "node" and "tape" in deps and rest and not rest[0].startswith("-"):
            return "tape", rest
    return None


def split_node_flags(args: list[str]) -> tuple[list[str], list[str]]:
    """(node's own flags, the rest) of a node-test command's arguments."""
    flags, rest, i = [], [], 0
    while i < len(args):
        word = args[i]
        name = word.split("=", 1)[0]
        if name in _NODE_FLAGS or name.startswith("--experimental-"):
            flags.append(word)
            if _NODE_FLAGS.get(name) and "=" not in word and i + 1 < len(args):
                flags.append(args[i + 1])
                i += 1
        else:
            rest.append(word)
        i += 1
    return flags, rest


def source_roots(tree: Path) -> list[str]:
    """The library's top-level source folders and files (not its tests, docs or build output)."""
    roots = []
    for entry in sorted(tree.iterdir()):
        name = entry.name
        if name.startswith((".", "_")) or name in _NOT_SOURCES:
            continue
        if entry.is_file() and entry.suffix in _SOURCE_SUFFIXES and not re.search(
                r"(^|[.-])(test|spec)s?\.|config\.|^(gulpfile|gruntfile|rollup|webpack|eslint)", name, re.I):
            roots.append(name)
        elif entry.is_dir() and any(p.suffix in _SOURCE_SUFFIXES for p in entry.rglob("*")):
            roots.append(name)
    return roots


def env_dir(source: PinnedSource, recipe: Recipe) -> Path:
    return cache_root() / "envs" / f"{source.name}-{source.commit[:12]}-{recipe.key()}"


def load(root: Path) -> NodeEnv | None:
    """The env at `root` (a build directory or an `env_id` link to one), or None if unbuilt."""
    marker = root / "ready.json"
    if not marker.exists():
        return None
    from featdel.core.records import from_dict

    return NodeEnv(root=root.resolve(), recipe=from_dict(Recipe, json.loads(marker.read_text())["recipe"]))


def build_env(source: PinnedSource, recipe: Recipe, *, tree_ready: Path | None = None,
              timeout_s: float = 1200) -> NodeEnv:
    """Build (or reuse) the environment; `tree_ready` is a checkout to move into place."""
    from featdel.env import envs

    root = env_dir(source, recipe)
    existing = load(root)
    if existing is not None:
        return existing
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env = NodeEnv(root=root, recipe=recipe)
    if tree_ready is not None:
        shutil.copytree(tree_ready, env.src, symlinks=True)
    else:
        checkout(source, env.src)
    (root / "home").mkdir()
    for name in ("package.json", ".npmrc", *LOCKS):
        if (env.src / name).is_file():
            shutil.copyfile(env.src / name, root / name)
    if not (root / "package.json").is_file():
        raise EnvBuildError(f"{source.spec}: no package.json at the top of the tree")
    log = root / "build.log"
    variables = {**os.environ, "npm_config_cache": str(cache_root() / "npm-cache"), "npm_config_update_notifier": "false"}
    for argv in recipe.install:
        _run(argv, cwd=root, env=variables, log=log, timeout=timeout_s)
    env.node_modules.mkdir(exist_ok=True)  # a package with no dependencies: still mounted
    pruned = prune_own_copies(root, recipe)
    if pruned:
        with log.open("a") as fh:
            fh.write(f"featdel: removed the package's own copies no test tool loads: {' '.join(pruned)}\n")
    lock = [f"node@{node_version()}", *(e for e in lock_entries(root) if e.rsplit("@", 1)[0] not in pruned)]
    return envs.save(NodeEnv(root=root, recipe=replace(recipe, lock=lock)), source.name, source.commit)


# Direct dependencies that take part in a test run besides the runner: transforms, environments,
# plugins and registers (ts-jest, @swc/jest, jest-environment-jsdom, @vitest/*, ts-node, tsx).
_RUN_TOOLS = re.compile(r"(^|[-/@])(jest|vitest|vite|mocha|tape|ts-node|tsx|esbuild-register|babel|swc)([-/]|$)")
_RUNNER_PACKAGES = {"mocha": "mocha", "jest": "jest", "vitest": "vitest", "tape": "tape", "node-test": None}


def prune_own_copies(root: Path, recipe: Recipe) -> list[str]:
    """Remove the installed copies of the package itself that nothing of a test run can load.

    Small libraries are dependencies of their own dev tools (unbuild brings defu, destr and ufo;
    old micromatch brings kind-of), and such a copy holds the very code a deletion takes out: the
    leak audit rightly rejects every task while it is there. A copy is removed when it is outside
    the dependency closure, by node's resolution over the lock, of the runner and of the direct
    dependencies that take part in a run (`_RUN_TOOLS`); one the runner needs stays (tape's
    minimist and object-inspect, jest's ms through debug) and its tasks stay rejected. Returns the
    lock paths removed, sorted."""
    try:
        data = json.loads((root / "package-lock.json").read_text())
        own = json.loads((root / "package.json").read_text()).get("name")
    except (OSError, ValueError):
        return []
    top = (data.get("packages") or {}).get("") or {}
    packages = {k: v for k, v in (data.get("packages") or {}).items() if k}
    if not own or not packages:
        return []
    direct = {**(top.get("dependencies") or {}), **(top.get("devDependencies") or {})}
    runner = _RUNNER_PACKAGES.get(recipe.test_cmd[0] if recipe.test_cmd else "")
    roots = [f"node_modules/{n}" for n in {runner, *(d for d in direct if _RUN_TOOLS.search(d))} if n]
    needed = _closure(packages, roots)
    copies = sorted(k for k in packages if k.endswith(f"node_modules/{own}") and k not in needed)
    for rel in copies:
        shutil.rmtree(root / rel, ignore_errors=True)
    return copies


def _closure(packages: dict[str, dict], roots: list[str]) -> set[str]:
    """Every lock path reachable from `roots` through dependencies, resolved as node does (the
    nearest `node_modules/NAME` at or above the package that asks)."""
    seen: set[str] = set()
    stack = [r for r in roots if r in packages]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        meta = packages[path]
        for field in ("dependencies", "optionalDependencies", "peerDependencies"):
            for name in meta.get(field) or {}:
                if (found := _resolve(packages, path, name)) is not None:
                    stack.append(found)
    return seen


def _resolve(packages: dict[str, dict], at: str, name: str) -> str | None:
    while True:
        candidate = f"{at}/node_modules/{name}" if at else f"node_modules/{name}"
        if candidate in packages:
            return candidate
        if not at:
            return None
        cut = at.rfind("/node_modules/")
        at = at[:cut] if cut >= 0 else ""


def node_version() -> str:
    try:
        out = subprocess.run([node_binary(), "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (subprocess.SubprocessError, OSError) as exc:
        raise EnvBuildError(f"node does not run here ({exc}): install Node.js 20 or newer") from None
    return out.stdout.strip().lstrip("v")


def node_binary() -> str:
    found = shutil.which("node")
    if found is None:
        raise EnvBuildError("node is not on PATH: install Node.js 20 or newer")
    return str(Path(found).resolve())


def lock_entries(root: Path) -> list[str]:
    """`PATH@VERSION` of every package the lock npm installed from names, sorted."""
    for name in LOCKS:
        if (root / name).is_file():
            data = json.loads((root / name).read_text())
            break
    else:
        return []
    packages = data.get("packages") or {}
    return sorted(f"{path}@{meta.get('version', '?')}" for path, meta in packages.items() if path)


def _package(tree: Path) -> dict:
    try:
        return json.loads((tree / "package.json").read_text())
    except (OSError, ValueError):
        return {}


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _run(argv: list[str], *, cwd: Path, env, log: Path, timeout: float) -> None:
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(argv)}\n")
        fh.flush()
        try:
            done = subprocess.run(argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EnvBuildError(f"install step timed out after {timeout:.0f}s: {' '.join(argv)} (see {log})") from None
        except OSError as exc:
            raise EnvBuildError(f"install step could not start: {' '.join(argv)}: {exc}") from None
    if done.returncode != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:]
        raise EnvBuildError(f"install failed: {' '.join(argv)}: {tail[0][:200] if tail else ''} (see {log})")
