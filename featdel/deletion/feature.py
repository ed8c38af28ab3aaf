"""The `feature` strategy: a public function or method and the private helpers only it uses.

In: the original tree and a public function/method candidate. Out: edits across every file the
feature and its helpers touch. Steps, each checked and rolled back alone (FeatureBench's loop):
1. the feature itself is removed; if that fails the check (a re-export in `__init__.py`, a
   decorator use at import time) its body is stubbed instead, keeping the signature and, by
   option, the docstring; if that fails too the strategy is rolled back;
2. each helper from `callgraph.only_used_by`, in source order, is removed together with its name
   in plain `from <its module> import _h` statements of source files (the statement goes when no
   name is left). A helper whose step fails stays and is listed in `rolled_back`.
A feature with no helper is refused: the `function`/`method` strategies already cover it. All
splices of a file are recomputed from the original bytes at every step, so steps compose.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from featdel.deletion.base import (
    Check,
    KindStrategy,
    NotApplicable,
    RolledBack,
    Tree,
    decode,
    make_deletion,
    passes,
    target_symbols,
)
from featdel.deletion.body import replaced, stub_splices
from featdel.deletion.callgraph import Helper, file_imports, helpers_for, only_used_by
from featdel.deletion.imports import module_name
from featdel.deletion.remove import cut
from featdel.deletion.splice import Lines, Splice, apply, removal, statement_node
from featdel.records import Candidate, Deletion


@dataclass
class _FilePlan:
    """What is cut from one file so far; rendered from the original bytes every time."""

    nodes: list = field(default_factory=list)  # statements removed whole
    drops: dict[int, set[int]] = field(default_factory=dict)  # from-import byte -> dropped names
    stubs: list[Splice] = field(default_factory=list)

    def copy(self) -> _FilePlan:
        return _FilePlan(list(self.nodes), {k: set(v) for k, v in self.drops.items()}, list(self.stubs))


def _name_splices(stmt, dropped: set[int]) -> list[Splice]:
    """Splices dropping some names of a from-import that keeps at least one."""
    names = list(stmt.children_by_field_name("name"))
    gone = [n.start_byte in dropped for n in names]
    tail = len(names)
    while tail > 0 and gone[tail - 1]:
        tail -= 1
    out = [Splice(n.start_byte, names[i + 1].start_byte, b"") for i, n in enumerate(names[:tail]) if gone[i]]
    if tail < len(names):
        out.append(Splice(names[tail - 1].end_byte, names[-1].end_byte, b""))
    return out


class _Plan:
    def __init__(self, tree: Tree):
        self.tree = tree
        self.files: dict[str, _FilePlan] = {}

    def render(self) -> dict[str, str | None]:
        edits: dict[str, str | None] = {}
        for rel, plan in sorted(self.files.items()):
            source, ts = self.tree.read(rel), self.tree.tree(rel)
            nodes, splices = list(plan.nodes), list(plan.stubs)
            for ref in file_imports(self.tree, rel):
                dropped = plan.drops.get(ref.node.start_byte)
                if not dropped:
                    continue
                if len(dropped) == len(ref.names) and not ref.aliased:
                    nodes.append(ref.node)
                else:
                    splices += _name_splices(ref.node, dropped)
            splices += removal(source, ts, nodes) if nodes else []
            edits[rel] = decode(apply(source, splices))
        return edits

    def trial(self, change) -> tuple[_Plan, dict[str, str | None]]:
        nxt = _Plan(self.tree)
        nxt.files = {k: v.copy() for k, v in self.files.items()}
        change(nxt)
        return nxt, nxt.render()

    def file(self, rel: str) -> _FilePlan:
        return self.files.setdefault(rel, _FilePlan())


def _drop_imports(plan: _Plan, helper: Helper, tree: Tree) -> None:
    """Drop `helper` from the from-imports of source files that import it from its module."""
    paths = set(tree.paths())
    home = module_name(helper.path, paths)
    for rel in tree.source_paths():
        if helper.name.encode() not in tree.read(rel):
            continue
        for ref in file_imports(tree, rel):
            if ref.source_module != home:
                continue
            for name, node in ref.names:
                if name == helper.name:
                    plan.file(rel).drops.setdefault(ref.node.start_byte, set()).add(node.start_byte)


class FeatureStrategy(KindStrategy):
    name = "feature"
    kinds = frozenset({"function", "method"})

    def fits(self, candidate: Candidate) -> bool:
        return super().fits(candidate) and not candidate.qualname.rpartition(".")[2].startswith("_")

    def apply(
        self,
        root: Path,
        candidate: Candidate,
        *,
        check: Check,
        keep_docstrings: bool,
        rng: random.Random,
    ) -> Deletion:
        tree = Tree.open(root)
        found = target_symbols(tree, candidate, self.kinds)
        if found[0].name.startswith("_"):
            raise NotApplicable(f"{candidate.qualname} is private: a feature starts from a public name")
        helpers = only_used_by(tree, found, helpers_for(tree, candidate.path, candidate.qualname, candidate.kind))
        if not helpers:
            raise NotApplicable(f"no private helper is used only by {candidate.qualname}")
        rel, target = candidate.path, f"{candidate.path}::{candidate.qualname}"
        ts = tree.tree(rel)
        outers = [statement_node(ts, s) for s in found]
        plan, edits = _Plan(tree).trial(lambda p: p.file(rel).nodes.extend(outers))
        ok, reason = passes(check, edits)
        deleted, stubbed, removed, rolled_back = [target], [], [], []
        if ok:
            removed += cut(tree, rel, found).removed
        else:
            lines = Lines(tree.read(rel), ts)
            stubs = stub_splices(lines, outers, keep_docstring=keep_docstrings)
            plan, edits = _Plan(tree).trial(lambda p: p.file(rel).stubs.extend(stubs))
            ok, why = passes(check, edits)
            if not ok:
                raise RolledBack(f"removing {candidate.qualname} fails ({reason}), stubbing too ({why})")
            stubbed.append(target)
            removed += [replaced(tree.read(rel), s) for s in stubs]
        for h in helpers:
            hts = tree.tree(h.path)
            nodes = [statement_node(hts, d) for d in h.defs]

            def change(p: _Plan, h=h, nodes=nodes) -> None:
                p.file(h.path).nodes.extend(nodes)
                _drop_imports(p, h, tree)

            nxt, proposed = plan.trial(change)
            ok, _ = passes(check, proposed)
            if not ok:
                rolled_back.append(h.key)
                continue
            plan, edits = nxt, proposed
            c = cut(tree, h.path, list(h.defs))
            deleted += [d for d in c.deleted if d not in deleted]
            removed += c.removed
        if len(deleted) == 1:
            raise RolledBack(f"every helper of {candidate.qualname} was rolled back: {rolled_back}")
        return make_deletion(
            candidate,
            self.name,
            keep_docstrings=keep_docstrings if stubbed else False,
            deleted=deleted,
            files={k: v for k, v in edits.items() if v != tree.read(k).decode("utf-8")},
            removed=removed,
            stubbed=stubbed,
            rolled_back=rolled_back,
        )
