"""The pytest plugin featdel loads into a repository's test run (built by `featdel_launch.py`).

Each test's outcome is decided here, from this plugin's own wrappers around setup, the call of
the test function and teardown (a phase that raised, a test function that was never called, or
one that is not the function collected, is not a pass); pytest's report only ever makes it
worse, so a patched `TestReport` earns nothing, and a report that says passed where the wrapper
saw an exception is a tripwire. Every record leaves the process as it happens through `emit`
(the launcher's signed channel): `start` (the config file and plugins pytest loaded),
`collected`, one `test` per test, `trip` for tampering seen at run time, and `end`.

All state lives in `build()`'s closure, none at module level: rebinding this module's attributes
changes nothing. The one exception is read before any code of the tree runs: the starting point of
the check below, which a warm pytest takes once before it forks its runs (`warm()`), and which a
run's `build()` takes over only if the same pytest modules are loaded. At the start and after every test the plugin compares pytest's, pluggy's and
its own functions and classes, and the hook implementations on the path of a test, with what
they were before any code of the tree ran; a change is a `trip` (a class attribute write is
invisible to audit hooks, so this is the layer that sees it).

When coverage.py is measuring, the coverage context follows the running test's node id, with
`|setup` appended during its setup phase.
This file runs inside the sandbox with the repository's interpreter: standard library and pytest.
"""


_WARM: list = []  # ({name: module} watched, before, homes, layout), from `warm()`; never written by a run


def warm() -> None:
    """Take the check's starting point now, in a process that has run no code of any tree (the
    zygote, before its first fork): each run forked from it skips building it (about 6 ms)."""
    _WARM[:] = [build(None, _warm=True)]


def build(emit, *, expect_config=None, env_plugins=(), changed_files=(), watch_files=(), run_only=None,
          _warm=False):
    """The plugin object for one run (see the module docstring). `changed_files`: the
    absolute paths the patch changed, or a function of a path that is true for those (the
    launcher's `patch_files`, which knows a file by its inode, not its name); a plugin module
    among them is tampering. `watch_files`:
    test files whose collected functions must still hold their assertions. `run_only`: node ids;
    every test is collected (the `collected` record's `found` lists them all) and only these
    run, the others deselected (verification's build check and first run in one start). Everything the
    hooks use is a local of this call (modules included), so no module attribute reaches it."""
    import os
    import sys
    from builtins import (
        all,
        any,
        callable,
        dict,
        frozenset,
        getattr,
        hasattr,
        id,
        isinstance,
        len,
        list,
        map,
        object,
        set,
        sorted,
        str,
        tuple,
        type,
        vars,
    )

    from operator import is_

    import pytest

    modules = sys.modules
    _function = type(build)  # a plain function's type
    _module = type(sys)  # a module's (a class merely named "module" is not one)
    _mro = type.__dict__["__mro__"].__get__  # a class's method resolution order, as the type keeps it
    _RANK = {"passed": 0, "xpassed": 1, "skipped": 2, "xfailed": 2, "failed": 3, "error": 4}
    _WATCHED_PREFIXES = ("_pytest", "pluggy", "featdel_report")
    # Hooks on the path from "run this test" to its outcome: a new implementation is tampering.
    _PATH_HOOKS = ("pytest_runtestloop", "pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                   "pytest_runtest_teardown", "pytest_pyfunc_call", "pytest_runtest_makereport",
                   "pytest_runtest_logreport", "pytest_sessionfinish", "pytest_collection_modifyitems")
    # Module globals pytest itself rebinds while it runs (assertion hooks set per session).
    _MUTABLE = frozenset({("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
                          ("_pytest.assertion.util", "_config")})

    def _watched(name: str) -> bool:
        return name == "pytest" or name.startswith(_WATCHED_PREFIXES)

    def _code_like(value) -> bool:
        return callable(value) or isinstance(value, (classmethod, staticmethod, property))


    # The modules on the path of every test, compared after each one (the rest at collection and end).
    _HOT = frozenset({"_pytest.runner", "_pytest.python", "_pytest.reports", "_pytest.nodes", "_pytest.unittest",
                      "_pytest.doctest", "_pytest.skipping", "_pytest.outcomes", "_pytest.main", "pluggy._callers",
                      "pluggy._hooks", "pluggy._result", "featdel_report"})

    def _sig(value) -> tuple:
        """What a value's behaviour hangs on besides its identity: a function's code and defaults
        (a `__code__` swap keeps the function object); a class's bases and metaclass (its members
        are entries of their own, and a failed attribute lookup on a class is slow)."""
        if type(value) is _function:  # its own, whatever a `__func__` attribute set on it says
            return value.__code__, value.__defaults__, value.__kwdefaults__
        if isinstance(value, type):  # its bases (a `__bases__` write) and metaclass; members apart
            return _mro(value), type(value)
        out = []
        for fn in ((value.fget, value.fset) if isinstance(value, property) else (getattr(value, "__func__", value),)):
            out += [getattr(fn, "__code__", None), getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None)]
        return tuple(out)

    def fingerprint() -> dict:
        """(module, name[, attribute]) -> (object, `_sig`) for every function and class of pytest,
        pluggy and this plugin, and every function-like attribute of those classes."""
        out = {}
        for mod_name, mod in list(modules.items()):
            if mod is None or not _watched(mod_name):
                continue
            for name, value in list(vars(mod).items()):
                if not _code_like(value) or (mod_name, name) in _MUTABLE or isinstance(value, _module):
                    continue
                out[(mod_name, name)] = (value, _sig(value))
                if isinstance(value, type) and value.__module__ == mod_name:
                    for attr, member in list(vars(value).items()):
                        if _code_like(member):
                            out[(mod_name, name, attr)] = (member, _sig(member))
        return out

    def _listed(key: tuple, value) -> bool:
        """Would `fingerprint()` list `value` under `key`?"""
        if len(key) == 3:
            return _code_like(value)
        return _code_like(value) and key not in _MUTABLE and not isinstance(value, _module)

    def _where(prefix: tuple):
        """The namespace `fingerprint()` reads the names under `prefix` from now ((module,) or
        (module, class)), or None where it would list none of them."""
        mod = homes.get(prefix[0])
        if mod is None:
            return None
        space = vars(mod)
        if len(prefix) == 1:
            return space
        owner = space.get(prefix[1])
        if not _listed(prefix, owner) or not isinstance(owner, type) or owner.__module__ != prefix[0]:
            return None
        return vars(owner)

    def _layout(before: dict) -> dict:
        """prefix ((module,) or (module, class)) -> (its entries in `before` as (name, object,
        sig), every other name its namespace holds with its value, all of its names): what
        `changed` compares against, taken with `before`, before any code of the tree runs."""
        groups = {}
        for key, (value, sig) in before.items():
            groups.setdefault(key[:-1], []).append((key[-1], value, sig))
        out = {}
        for prefix, entries in groups.items():
            space = _where(prefix) or {}
            listed = frozenset(name for name, _, _ in entries)
            out[prefix] = (entries, [(n, v) for n, v in list(space.items()) if n not in listed], frozenset(space))
        return out

    def changed() -> list:
        """What differs from `before` now: replaced, removed or added functions and class members,
        and watched modules replaced in `sys.modules`, less pytest's own rebinding
        (`_runner_code`). A function whose code or defaults were swapped in place is named
        whatever it now runs (the runner never does that). Found without building `fingerprint()`
        again, from `layout`: each entry is looked up where it lives (identity, then its code and
        defaults by identity); a name the namespace held unlisted counts once it holds something
        `fingerprint()` would list; a name new to the namespace likewise."""
        diffs, now, swapped = [], {}, set()
        # pytest's code reads the modules it imported, whatever `sys.modules` now holds
        diffs += [(name,) for name, mod in homes.items() if modules.get(name) is not mod]
        for prefix, (entries, unlisted, names) in layout.items():
            space = _where(prefix)
            if space is None:
                diffs += [(*prefix, name) for name, _, _ in entries]  # gone, or no longer listed
                continue
            for name, old, sig in entries:
                value = space.get(name, _absent)
                if value is old:
                    if type(old) is _function:
                        if old.__code__ is sig[0] and old.__defaults__ is sig[1] and old.__kwdefaults__ is sig[2]:
                            continue
                    elif _same_sig(_sig(old), sig):
                        continue
                    diffs.append((*prefix, name))
                    swapped.add((*prefix, name))
                    continue
                key = (*prefix, name)
                diffs.append(key)
                if value is not _absent and _listed(key, value):
                    now[key] = value
            for name, old in unlisted:
                value = space.get(name, _absent)
                if value is not old and value is not _absent and _listed((*prefix, name), value):
                    diffs.append((*prefix, name))
                    now[(*prefix, name)] = value
            if space.keys() != names:
                for name in space.keys() - names:
                    key, value = (*prefix, name), space.get(name)
                    if _listed(key, value):
                        diffs.append(key)
                        now[key] = value
        return sorted(".".join(k) for k in diffs if k in swapped or not _runner_code(now.get(k)))[:20]

    def _same_sig(a: tuple, b: tuple) -> bool:
        return len(a) == len(b) and all(map(is_, a, b))  # identity: an object's __eq__ could lie

    def _roots() -> tuple:
        import _pytest
        import pluggy

        return tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (_pytest, pluggy, pytest)) + (
            os.path.dirname(os.path.abspath(__file__)) + os.sep,)

    def _runner_code(value) -> bool:
        """Is `value` one of the rebindings pytest makes to itself while it runs? A function or
        property only from `_pytest/legacypath.py` (its plugin rebinds at configure); a class
        only when every function it defines has its code in pytest, pluggy or this plugin
        (`_pytest.doctest` sets `CHECKER_CLASS` to a class of its own at the first doctest).
        Another pytest function put in place of one (`Function.runtest = Node.setup`), or a
        class whose `__module__` merely names a pytest module, is tampering."""
        if value is None:
            return False
        if isinstance(value, type):
            own = [getattr(m, "__func__", m) for m in list(vars(value).values())
                   if type(getattr(m, "__func__", m)) is _function]
            return bool(own) and all(f.__code__.co_filename.startswith(_ROOTS) for f in own)
        if isinstance(value, property):
            value = value.fget
        if type(value) is not _function:
            value = getattr(value, "__func__", value)  # classmethod, staticmethod, bound method
        code = getattr(value, "__code__", None)
        return type(code).__name__ == "code" and code.co_filename == _LEGACYPATH

    def _namespace(hooks: dict):
        class FeatdelPlugin:
            __slots__ = ()

        plugin = FeatdelPlugin()
        for name, fn in hooks.items():
            setattr(FeatdelPlugin, name, staticmethod(fn))
        return plugin

    def _ours(item, current: dict, xfailed_key, needs_call: bool) -> str:
        """This plugin's outcome for one test, from its own wrappers."""
        for name, failed_as in (("setup", "error"), ("call", "failed"), ("teardown", "error")):
            got = current[name]
            if got is None:
                return "failed" if name == "call" or current["setup"] == "ok" else "error"  # never ran
            if got != "ok":
                return failed_as if got == "failed" else got
        if needs_call and not current["invoked"]:
            return "failed"  # a test function that was never called did not pass
        if xfailed_key is not None and item.stash.get(xfailed_key, None):
            return "xpassed"
        return "passed"

    def _reported(report) -> str:
        """pytest's outcome for one phase report."""
        if report.when == "call":
            if hasattr(report, "wasxfail"):
                return "xfailed" if report.skipped else "xpassed"
            return report.outcome
        if report.failed:
            return "error"
        return "skipped" if report.skipped else "passed"

    def _impls(config) -> tuple:
        out = []
        for name in _PATH_HOOKS:
            caller = getattr(config.pluginmanager.hook, name, None)
            if caller is not None:
                out += [f"{name}:{impl.plugin_name}:{id(impl.function)}" for impl in caller.get_hookimpls()]
        return tuple(out)

    def _plugin_names(config) -> set:
        return {name for name, _ in config.pluginmanager.list_name_plugin()}

    def _new_plugins(config, known: set, changed_files) -> list:
        """Plugins registered since the first conftest was imported that come from a file the patch
        changed, or (objects) whose class is defined in one. Every conftest.py is the task's, and
        the modules its `pytest_plugins` names load as the task says unless the patch changed them."""
        out = []
        for name, plugin in config.pluginmanager.list_name_plugin():
            if name in known or plugin is None:
                continue
            if type(plugin).__name__ == "module":
                if changed_files(getattr(plugin, "__file__", "") or ""):
                    out.append(name)
                continue
            # an object: judged by where its hook functions' code lives, not by the module its
            # class claims (`__module__` is a plain attribute)
            files = {_code_file(getattr(plugin, attr, None)) for attr in dir(plugin) if attr.startswith("pytest_")}
            bad = sorted(f for f in files if f is not None and (changed_files(f) or not os.path.isfile(f)))
            if bad:
                out.append(f"{name} (hooks in {bad[0]})")
        return out

    def _shadowed(obj) -> list:
        """Names in an object's own dict that hide a method of its class (`item.runtest = f`)."""
        cls = type(obj)
        return [name for name in vars(obj) if callable(getattr(cls, name, None)) and not name.startswith("__")]

    def _code_file(fn) -> str | None:
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        return code.co_filename if type(code).__name__ == "code" else None

    def _impl_files(config) -> dict:
        """hook implementation -> the file its code lives in, for the hooks on a test's path."""
        out = {}
        for name in _PATH_HOOKS:
            caller = getattr(config.pluginmanager.hook, name, None)
            for impl in caller.get_hookimpls() if caller is not None else ():
                out[f"{name}:{impl.plugin_name}:{id(impl.function)}"] = _code_file(impl.function)
        return out

    def _has_assert(code) -> bool:
        """Does this code (or code nested in it) still raise AssertionError anywhere: a plain
        `assert` (LOAD_ASSERTION_ERROR) or pytest's rewritten form (the name AssertionError)?"""
        stack = [code]
        while stack:
            c = stack.pop()
            if "AssertionError" in c.co_names or load_assertion in c.co_code[::2]:
                return True
            stack += [k for k in c.co_consts if type(k).__name__ == "code"]
        return False

    def _defs(paths) -> dict:
        """(file, first line of a function) -> (its name, whether its source holds an `assert`,
        the head names of the decorators written on it and on its class, their number), and
        file -> the names its assignments bind; read before any code of the tree runs (a module
        swapped in later cannot change it)."""
        import ast

        def head(node):
            node = node.func if isinstance(node, ast.Call) else node
            while isinstance(node, (ast.Attribute, ast.Call)):
                node = node.value if isinstance(node, ast.Attribute) else node.func
            return node.id if isinstance(node, ast.Name) else ""

        out = {}
        for path in paths:
            try:
                with open(path, "rb") as fh:
                    tree = ast.parse(fh.read())
            except (OSError, SyntaxError, ValueError):
                continue
            outer = {}  # a method -> its class's decorators (freezegun's wraps every method)
            bound = set()  # names an assignment binds: `test_a = make_test(1)`, `Cls.test_b = f`
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        bound.add(getattr(target, "id", None) or getattr(target, "attr", None))
                if isinstance(node, ast.ClassDef):
                    for member in node.body:
                        outer[id(member)] = node.decorator_list
            for node in ast.walk(tree):
                if isinstance(node, ast.Lambda):  # a test may be a lambda: pinned, with no name
                    out.setdefault((path, node.lineno), ("<lambda>", False, frozenset(), 0))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                    written = node.decorator_list + outer.get(id(node), [])
                    out[(path, first)] = (node.name, any(isinstance(n, ast.Assert) for n in ast.walk(node)),
                                          frozenset(head(d) for d in written) - {""}, len(written))
            out[path] = bound
        return out

    def _module_file(value) -> str:
        if isinstance(value, _module):
            return getattr(value, "__file__", "") or ""
        return getattr(modules.get(getattr(value, "__module__", None) or ""), "__file__", "") or ""

    def _replaced(item, obj):
        """(tripwire, why) when the function collected for a test of a watched file is not one a
        watched file defines under the test's name (a class may inherit tests from another test
        file), wrapped at most by the decorators written on it, each wrapper from the module its
        decorator names (`functools.wraps` leaves `__wrapped__`), with its asserts; else None."""
        wrappers, inner = [], obj
        for _ in range(8):
            code = getattr(inner, "__code__", None)
            if type(code).__name__ != "code":
                return "test-replaced", "it is not a function"
            if (code.co_filename, code.co_firstlineno) in defs:
                break
            wrappers.append(code.co_filename)
            inner = getattr(inner, "__wrapped__", None)
            if inner is None:
                return "test-replaced", f"its code comes from {wrappers[0]}"
        else:
            return "test-replaced", "it is wrapped eight deep"
        name, asserts, heads, written = defs[(code.co_filename, code.co_firstlineno)]
        if name == "<lambda>" and code.co_name == name and not wrappers:
            return None  # a lambda the file writes (`test_x = lambda: ...`)
        # Under another name only where a watched file binds the test's name by assignment (a
        # test made by a factory, a function set on a class): not another test's function
        wanted = getattr(item, "originalname", name)
        if code.co_name != name or (name != wanted and not any(wanted in defs.get(f, ()) for f in
                                                                 (code.co_filename, str(item.path)))):
            return "test-replaced", f"its code is {name} of {code.co_filename}"
        if len(wrappers) > written:
            return "test-replaced", f"{len(wrappers)} wrappers, {written} decorators written; one from {wrappers[0]}"
        names = getattr(inner, "__globals__", None)
        allowed = {_module_file(names.get(h)) for h in heads} if isinstance(names, dict) else set()
        strange = [f for f in wrappers if f not in allowed]
        if strange:
            return "test-replaced", f"its wrapper comes from {strange[0]}, which no decorator written on it names"
        if asserts and not _has_assert(code):
            return "asserts-removed", "the test collected is not the file's test"
        return None

    def _coverage():
        # only a run under `coverage run` measures, and that imported coverage before pytest: no
        # import here (it costs a run 50 ms)
        coverage = modules.get("coverage")
        current = getattr(getattr(coverage, "Coverage", None), "current", None)
        return current() if current is not None else None

    from _pytest.python import Function

    Skipped, XFailed = pytest.skip.Exception, pytest.xfail.Exception
    plain_runtest = Function.runtest  # items whose runtest is this call pytest_pyfunc_call
    if not callable(changed_files):
        changed_files = frozenset(changed_files).__contains__
    try:
        from _pytest.skipping import xfailed_key
    except ImportError:
        xfailed_key = None
    _ROOTS = _roots()
    _LEGACYPATH = os.path.join(_ROOTS[0], "legacypath.py")  # _pytest/legacypath.py
    _absent = object()
    loaded = {name: mod for name, mod in list(modules.items()) if mod is not None and _watched(name)}
    kept = _WARM[0] if _WARM and not _warm else None
    if kept is not None and len(kept[0]) == len(loaded) and all(loaded.get(n) is m for n, m in kept[0].items()):
        _, before, homes, layout = kept  # taken in this process's warm parent, from these very modules
    else:
        before = fingerprint()
        homes = {key[0]: modules[key[0]] for key in before}  # the modules themselves, before any tree code
        layout = _layout(before)
    if _warm:
        return loaded, before, homes, layout
    load_assertion = __import__("dis").opmap.get("LOAD_ASSERTION_ERROR", -1)
    defs = _defs(watch_files)
    watched_files = frozenset(watch_files)
    run_only = None if run_only is None else frozenset(run_only)
    state = {"tests": {}, "collected": [], "found": None, "errors": [], "objs": {}, "impls": None, "plugins": None,
             "early_impls": set(),
             "tripped": set(), "current": None, "hot": []}

    def trip(rule: str, what: str) -> None:
        if (rule, what) not in state["tripped"]:
            state["tripped"].add((rule, what))
            emit({"kind": "trip", "rule": rule, "what": what[:300]})

    def hot_entries() -> list:
        """(namespace dict, name, object, size) for the modules on every test's path and their
        classes: what a check after each test compares by identity (a full check is too slow)."""
        out = []
        for key, (value, sig) in before.items():
            if key[0] in _HOT:
                space = vars(modules[key[0]]) if len(key) == 2 else vars(vars(modules[key[0]])[key[1]])
                out.append((space, key[-1], value, _fn(value), sig[0]))
        return out

    def _fn(value):
        """The function whose `__code__` a value runs (None for a class or a builtin)."""
        value = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        return value if type(getattr(value, "__code__", None)).__name__ == "code" else None

    def check(config, hot: bool = False) -> None:
        if hot:
            for space, name, value, fn, code in state["hot"]:
                if space.get(name) is not value or (fn is not None and fn.__code__ is not code):
                    hot = False  # something on the path changed: the full check names it
                    break
        if not hot:
            for name in changed():
                trip("runner-changed", name)
            # what pytest's own code rebound (legacypath, at configure) is the new normal
            refreshed = []
            for space, name, value, fn, code in state["hot"]:
                now = space.get(name)
                if now is not value and _runner_code(now):
                    value, fn = now, _fn(now)
                    code = fn.__code__ if fn is not None else None
                refreshed.append((space, name, value, fn, code))
            state["hot"] = refreshed
        impls = _impls(config)
        if state["impls"] is not None and impls != state["impls"]:
            trip("hook-added", ", ".join(sorted(set(impls) ^ set(state["impls"])))[:300])
        if not hot:
            for name in _new_plugins(config, state["plugins"] or set(), changed_files):
                trip("plugin-added", name)

    state["hot"] = hot_entries()

    def classify(exc) -> str:
        if exc is None:
            return "ok"
        if isinstance(exc, Skipped):
            return "skipped"
        if isinstance(exc, XFailed):
            return "xfailed"
        return "failed"

    def phase(item, name):
        current = state["current"]
        try:
            result = yield
        except BaseException as exc:
            if current is not None:
                current[name] = classify(exc)
            raise
        if current is not None:
            current[name] = "ok"
            excinfo = item.__dict__.get("_excinfo")  # unittest: failures are kept on the item, not raised
            if name == "call" and excinfo:
                current[name] = classify(excinfo[0].value)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(early_config):
        # before the first conftest is imported, hence before any code of the package runs
        state["plugins"] = _plugin_names(early_config)
        state["early_impls"] = set(_impl_files(early_config))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(session):
        config = session.config
        inipath = str(config.inipath) if config.inipath else ""
        emit({"kind": "start", "config": inipath, "rootdir": str(config.rootpath), "pid": os.getpid(),
              "plugins": sorted(env_plugins)})
        if expect_config is not None and inipath != expect_config:
            trip("config", f"pytest read {inipath or 'no config file'}, the task names {expect_config or 'none'}")

    def pytest_collectreport(report):
        if report.failed:
            state["errors"].append({"nodeid": report.nodeid, "message": str(report.longrepr)[-2000:]})

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(session, config, items):
        state["found"] = [item.nodeid for item in items]
        kept = [item for item in items if item.nodeid in run_only]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in run_only])
            items[:] = kept

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(session):
        state["collected"] = [item.nodeid for item in session.items]
        for item in session.items:
            obj = item.__dict__.get("_obj")
            if obj is not None and type(item).runtest is plain_runtest:
                state["objs"][item.nodeid] = (obj, getattr(obj, "__code__", None))
        found = {} if state["found"] is None else {"found": state["found"]}
        emit({"kind": "collected", "ids": state["collected"], "errors": state["errors"], **found})
        # hook implementations added since the first conftest must come from a real file the
        # patch did not change (a conftest is the task's; code built at run time is not a file)
        for impl, path in _impl_files(session.config).items():
            if impl not in state["early_impls"] and (path is None or changed_files(path) or not os.path.isfile(path)):
                trip("hook-added", f"{impl} ({path})")
        for item in session.items:
            obj = state["objs"].get(item.nodeid, (None, None))[0]
            if obj is None or str(item.path) not in watched_files:
                continue
            found = _replaced(item, obj)
            if found is not None:
                trip(found[0], f"{item.nodeid}: {found[1]}")
        state["impls"] = _impls(session.config)
        check(session.config)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(item, nextitem):
        cov = _coverage()
        if cov is not None:
            cov.switch_context(item.nodeid)
        current = state["current"] = {"setup": None, "call": None, "teardown": None, "invoked": False,
                                      "reported": "passed", "duration": 0.0}
        try:
            return (yield)
        finally:
            state["current"] = None
            if cov is not None:
                cov.switch_context("")
            ours = _ours(item, current, xfailed_key, item.nodeid in state["objs"])
            reported = current["reported"]
            if ours != "passed" and reported == "passed":
                trip("report-forged", f"{item.nodeid}: pytest's report says passed, the test {ours}")
            outcome = reported if ours == "passed" else (ours if reported == "passed" else reported)
            state["tests"][item.nodeid] = {"outcome": outcome, "duration": current["duration"]}
            emit({"kind": "test", "id": item.nodeid, "outcome": outcome, "duration": current["duration"]})
            check(item.config, hot=True)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(item):
        # A fixture of class, module or session scope is set up in the setup of the first test
        # that uses it: a context of its own says so (featdel.code.coverage_map, `in_setup`)
        cov = _coverage()
        if cov is not None:
            cov.switch_context(item.nodeid + "|setup")  # coverage_map.SETUP
        try:
            return (yield from phase(item, "setup"))
        finally:
            if cov is not None:
                cov.switch_context(item.nodeid)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(item):
        # Right before the call, not only after the test: a class attribute swapped in at setup
        # and put back by the stand-in itself is in place now; so is an instance attribute that
        # shadows the item's or the session's methods.
        check(item.config, hot=True)
        for obj in (item, item.session, item.config, item.config.pluginmanager):
            for name in _shadowed(obj):
                trip("instance-shadow", f"{type(obj).__name__}.{name} on {item.nodeid}")
        return (yield from phase(item, "call"))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(item, nextitem):
        return (yield from phase(item, "teardown"))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem):
        current = state["current"]
        expected = state["objs"].get(pyfuncitem.nodeid)
        obj = pyfuncitem.obj
        if expected is not None and (obj is not expected[0] or getattr(obj, "__code__", None) is not expected[1]):
            trip("test-replaced", pyfuncitem.nodeid)
        elif current is not None:
            current["invoked"] = True
        return (yield)

    def pytest_runtest_logreport(report):
        current = state["current"]
        if current is None:
            return
        current["duration"] += report.duration
        outcome = _reported(report)
        if _RANK[outcome] > _RANK[current["reported"]]:
            current["reported"] = outcome

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session, exitstatus):
        check(session.config)
        emit({"kind": "end", "exitstatus": int(exitstatus), "tests": len(state["tests"])})

    hooks = {name: value for name, value in locals().items() if name.startswith("pytest_")}
    if run_only is None:
        del hooks["pytest_collection_modifyitems"]  # a graded run has exactly the hooks it always had
    return _namespace(hooks)


