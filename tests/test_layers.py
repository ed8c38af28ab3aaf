"""The import contract: each layer of `featdel/` imports only layers below it, and no import
circle exists between modules. Every import counts, at module level or inside a function (a
lazy import is still a dependency); only `if TYPE_CHECKING:` blocks are left out.

The layers, lowest first, are `LAYERS` below; docs/layout.md says what each holds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "featdel"
LAYERS = [
    "core", "code", "sandboxes", "env", "lang", "grading", "agent", "deletion", "monitor", "pipeline", "curriculum",
    "interop", "trainer", "cli",
]
# Heavy libraries that only a command that needs them may import, never at module level.
HEAVY = {"torch", "ray", "datasets", "matplotlib", "transformers", "openai", "docker", "huggingface_hub"}
# ...except inside the layer built on it: the trainer is torch code, imported only by `featdel train`.
HEAVY_HOME = {"torch": "featdel.trainer"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py") if "pytest_plugin" not in p.parts}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, name: str, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported featdel module, line, at module level) for every import in `path`."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([base] if base else []))
                for a in child.names:
                    full = f"{base}.{a.name}"
                    found.append((full if full in known else base, child.lineno, top))
            visit(child, top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, True)
    return found


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "featdel" or len(parts) < 2:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: {i for i, _, _ in imports(p, m, known) if i in known and i != m} for m, p in mods.items()}


def test_every_module_lives_in_a_layer():
    loose = [m for m in modules() if m != "featdel" and layer_of(m) is None and m != "featdel.__main__"]
    assert not loose, f"modules outside the layers (move them into one of {LAYERS}): {loose}"


def test_no_module_imports_a_higher_layer():
    mods = modules()
    known = set(mods)
    climbs = []
    for m, p in mods.items():
        mine = layer_of(m)
        for target, line, _ in imports(p, m, known):
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                climbs.append(f"{p.relative_to(ROOT.parent)}:{line}: {m} ({LAYERS[mine]}) imports {target} "
                              f"({LAYERS[theirs]})")
    assert not climbs, "imports that run up a layer:\n" + "\n".join(sorted(set(climbs)))


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def test_no_import_circles():
    found = cycles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_package_importing_its_own_submodules_is_no_circle():
    # `featdel.x/__init__.py` re-exporting `featdel.x.y`, which imports nothing back, is fine;
    # a submodule that imports its package's __init__ while __init__ imports it is a circle.
    assert cycles({"a": {"a.b"}, "a.b": set()}) == []
    assert cycles({"a": {"a.b"}, "a.b": {"a"}}) == [["a", "a.b"]]


@pytest.mark.parametrize("lib", sorted(HEAVY))
def test_heavy_libraries_stay_lazy(lib):
    mods = modules()
    known = set(mods)
    eager = [f"{p.relative_to(ROOT.parent)}:{line}" for m, p in mods.items()
             for target, line, top in imports(p, m, known) if top and target.split(".")[0] == lib
             and not (lib in HEAVY_HOME and (m + ".").startswith(HEAVY_HOME[lib] + "."))]
    assert not eager, f"{lib} imported at module level (import it inside the function that needs it): {eager}"


def test_the_checker_sees_a_climb_and_a_circle(tmp_path):
    # The contract's own machinery on a made-up tree: a lazy import of a higher layer counts.
    low = tmp_path / "featdel" / "core" / "x.py"
    low.parent.mkdir(parents=True)
    low.write_text("def f():\n    from featdel.cli.main import main\n")
    found = imports(low, "featdel.core.x", {"featdel.cli.main", "featdel.cli.main.main"})
    assert ("featdel.cli.main.main", 2, False) in found
    assert layer_of("featdel.cli.main.main") > layer_of("featdel.core.x")
