"""The `feature` strategy: a public function, method or class, its wiring, and the private helpers
only it uses.

In: the original tree and a public candidate. Out: edits across every file the feature, its
wiring and its helpers touch. Steps, each checked and rolled back alone (FeatureBench's loop):
1. the feature itself is removed; if that fails the check, it is removed together with what wires
   it in (featdel.deletion.wiring: re-exports through `__init__.py`, `__all__` entries, aliases,
   registry entries and registrations), recorded in `wiring`; if that fails too its body is
   stubbed instead, keeping the signature and, by option, the docstring; if that fails as well the
   strategy is rolled back;
2. each helper from `callgraph.only_used_by` (private functions and classes, and public ones no
   other source code names), in source order, is removed together with its name in plain
   `from <its module> import h` statements of source files (the statement goes when no name is
   left) and, for a public one, its wiring. A helper whose step fails stays and is listed in
   `rolled_back`.
A feature with no helper is refused: the `function`/`method`/`class` strategies already cover it.
All splices of a file are recomputed from the original bytes at every step, so steps compose.
"""

from __future__ import annotations

import random
from pathlib import Path

from featdel.code.imports import module_name
from featdel.core.records import Candidate, Deletion
from featdel.deletion.base import (
    Check,
    KindStrategy,
    NotApplicable,
    RolledBack,
    Tree,
    make_deletion,
    passes,
    target_symbols,
)
from featdel.deletion.body import replaced, stub_splices
from featdel.deletion.callgraph import Helper, file_imports, helpers_for, only_used_by, public_helpers
from featdel.deletion.remove import cut
from featdel.deletion.splice import Lines, statement_node
from featdel.deletion.wiring import Plan, find


def _drop_imports(plan: Plan, helper: Helper, tree: Tree) -> None:
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
    kinds = frozenset({"function", "method", "class"})

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
        pool = helpers_for(tree, candidate.path, candidate.qualname, candidate.kind)
        pool += public_helpers(tree, candidate.path, candidate.qualname)
        helpers = only_used_by(tree, found, pool)
        if not helpers:
            raise NotApplicable(f"no helper is used only by {candidate.qualname}")
        rel, target = candidate.path, f"{candidate.path}::{candidate.qualname}"
        ts = tree.tree(rel)
        outers = [statement_node(ts, s) for s in found]
        plan, edits = Plan(tree).trial(lambda p: p.file(rel).nodes.extend(outers))
        ok, reason = passes(check, edits)
        deleted, stubbed, removed, rolled_back, wired = [target], [], [], [], []
        if not ok:  # take out what wires it in (re-exports, `__all__`, aliases, registrations)
            cls = candidate.qualname.rpartition(".")[0] if candidate.kind == "method" else None
            wiring = find(tree, rel, found[0].name, cls)
            if wiring:
                def with_wiring(p: Plan) -> None:
                    p.file(rel).nodes.extend(outers)
                    wiring.add_to(p)

                plan, edits = Plan(tree).trial(with_wiring)
                ok, why = passes(check, edits)
                reason = f"{reason}; with its wiring too: {why}" if not ok else reason
                wired = wiring.labels if ok else []
        if ok:
            c = cut(tree, rel, found)
            deleted, removed = list(c.deleted), removed + c.removed
        elif candidate.kind == "class":
            raise RolledBack(f"removing {candidate.qualname} fails the check: {reason}")
        else:
            lines = Lines(tree.read(rel), ts)
            stubs = stub_splices(lines, outers, keep_docstring=keep_docstrings)
            plan, edits = Plan(tree).trial(lambda p: p.file(rel).stubs.extend(stubs))
            ok, why = passes(check, edits)
            if not ok:
                raise RolledBack(f"removing {candidate.qualname} fails ({reason}), stubbing too ({why})")
            stubbed.append(target)
            removed += [replaced(tree.read(rel), s) for s in stubs]
        for h in helpers:
            hts = tree.tree(h.path)
            nodes = [statement_node(hts, d) for d in h.defs]

            wiring = find(tree, h.path, h.name) if h.public else None

            def change(p: Plan, h=h, nodes=nodes, wiring=wiring) -> None:
                p.file(h.path).nodes.extend(nodes)
                _drop_imports(p, h, tree)
                if wiring:
                    wiring.add_to(p)

            nxt, proposed = plan.trial(change)
            ok, _ = passes(check, proposed)
            if not ok:
                rolled_back.append(h.key)
                continue
            plan, edits = nxt, proposed
            wired += wiring.labels if wiring else []
            c = cut(tree, h.path, list(h.defs))
            deleted += [d for d in c.deleted if d not in deleted]
            removed += c.removed
        if not any(d.startswith(f"{h.key}") for h in helpers for d in deleted):
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
            wiring=wired,
        )
