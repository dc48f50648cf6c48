"""What the svod package exposes. `import svod` binds no modules but svod's own submodules. The
hand-written stubs (python/svod/__init__.pyi, comm.pyi) declare exactly what the modules have: the
module-level names and each class's members, compared both ways with svod, svod.comm and the compiled
svod._svod, so that a binding added, renamed or removed without its stub fails here."""
import ast
import inspect
import json
import pathlib
import subprocess
import sys

import pytest

import svod
import svod.comm

STUBS = pathlib.Path(svod.__file__).resolve().parent

# Dunders every class has from `object` or from how Python and pybind11 make classes: the stubs need
# not repeat them. Any other dunder a class defines (a protocol: __call__, __len__, __enter__, ...)
# must be declared.
IMPLICIT_DUNDERS = {"__dict__", "__doc__", "__init__", "__module__", "__qualname__", "__repr__", "__weakref__"}


class Stub:
    """The names a stub file declares, read from its syntax tree."""

    def __init__(self, path):
        tree = ast.parse(path.read_text(), str(path))
        self.names = set()    # module-level names the module has at run time
        self.aliases = set()  # type aliases (X = ...), which exist in the stub only
        self.classes = {}     # class name -> (names of its stub bases, names of its members)
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.names.add(node.name)
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                self.classes[node.name] = (bases, class_members(node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.names.add(node.target.id)
            elif isinstance(node, ast.Assign):
                self.aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                # In a stub only `import X as X` and `from M import X as X` re-export a name (PEP 484).
                self.names.update(a.asname for a in node.names if a.asname is not None and a.asname == a.name)

    def members(self, name):
        """A class's members with those it inherits from classes of the same stub."""
        bases, own = self.classes[name]
        out = set(own)
        for base in bases:
            if base in self.classes:
                out |= self.members(base)
        return out


def class_members(node):
    out = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            out.add(item.target.id)
        elif isinstance(item, ast.Assign):
            out.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return out


def runtime_members(cls):
    """What a class defines itself or inherits from svod's classes (not from builtins such as
    ValueError or pybind11's base)."""
    out = set()
    for klass in inspect.getmro(cls):
        if klass.__module__.split(".")[0] == "svod":
            out |= set(vars(klass))
    return out


def public(names):
    return {n for n in names if not n.startswith("_")}


def dunders(names):
    return {n for n in names if n.startswith("__") and n.endswith("__")}


def fresh_module_names():
    """The names in svod and svod.comm, each with the __name__ of the module it is bound to (None for
    anything else), in an interpreter that ran nothing but `import svod` (in this one, other tests'
    imports of svod.tinygrad add to them)."""
    code = ("import json, sys, types, svod\n"
            "print(json.dumps({name: {k: v.__name__ if isinstance(v, types.ModuleType) else None\n"
            "                         for k, v in vars(sys.modules[name]).items()}\n"
            "                  for name in ('svod', 'svod.comm')}))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def fresh():
    return fresh_module_names()


MODULES = [("svod", "__init__.pyi", svod), ("svod.comm", "comm.pyi", svod.comm)]


@pytest.mark.parametrize("name,stub_file,module", MODULES, ids=[m[0] for m in MODULES])
def test_stub_declares_the_module_level_names_the_module_has(name, stub_file, module, fresh):
    stub = Stub(STUBS / stub_file)
    has = fresh[name]
    assert public(stub.names) - set(has) == set(), f"{stub_file} declares names {name} lacks"
    assert public(has) - stub.names == set(), f"{name} has names {stub_file} does not declare"
    # Dunders it declares (__version__) exist too; type aliases exist in the stub only.
    assert dunders(stub.names) - set(has) == set()
    assert stub.aliases & set(has) == set(), f"{stub_file}: an alias hides a name {name} has"


@pytest.mark.parametrize("name,stub_file,module", MODULES, ids=[m[0] for m in MODULES])
def test_stub_declares_each_class_s_members(name, stub_file, module):
    stub = Stub(STUBS / stub_file)
    checked = 0
    for class_name in stub.classes:
        cls = getattr(module, class_name)
        assert inspect.isclass(cls), f"{name}.{class_name} is declared a class in {stub_file}"
        declared, has = stub.members(class_name), runtime_members(cls)
        assert public(declared) - has == set(), f"{stub_file}: {class_name} declares members it lacks"
        assert public(has) - declared == set(), f"{stub_file}: {class_name} has members it does not declare"
        assert dunders(declared) - has == set(), f"{stub_file}: {class_name} declares methods it lacks"
        assert dunders(has) - IMPLICIT_DUNDERS - declared == set(), \
            f"{stub_file}: {class_name} defines methods it does not declare"
        checked += 1
    assert checked == len(stub.classes) > 0


def test_everything_the_extension_binds_is_declared():
    """Every public name of svod._svod is one that svod or svod.comm exposes (and so declared in
    their stubs), the same object, and no class of it is left out of both."""
    declared = {}
    for name, stub_file, module in MODULES:
        for n in public(Stub(STUBS / stub_file).names):
            declared.setdefault(n, getattr(module, n))
    extension = public(vars(svod._svod))
    assert extension - set(declared) == set(), "svod._svod binds names neither svod nor svod.comm exposes"
    for n in extension:
        assert getattr(svod._svod, n) is declared[n], n


def test_import_svod_brings_no_other_module_objects(fresh):
    """The only modules among svod's and svod.comm's names are svod's own submodules, each under its
    own name: a module svod imports for itself, such as threading, bound to its plain name would be
    svod.threading to every user and their tools."""
    for name, names in fresh.items():
        modules = {k: module for k, module in names.items() if module is not None}
        assert {k: m for k, m in modules.items() if m != f"{name}.{k}"} == {}, \
            f"{name} has module objects that are not its submodules"
    assert fresh["svod"]["comm"] == "svod.comm"
