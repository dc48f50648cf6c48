"""What the svod package exposes: `import svod` binds no modules but svod's own submodules."""
import json
import subprocess
import sys

import pytest


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


def test_import_svod_brings_no_other_module_objects(fresh):
    """The only modules among svod's and svod.comm's names are svod's own submodules, each under its
    own name: a module svod imports for itself, such as threading, bound to its plain name would be
    svod.threading to every user and their tools."""
    for name, names in fresh.items():
        modules = {k: module for k, module in names.items() if module is not None}
        assert {k: m for k, m in modules.items() if m != f"{name}.{k}"} == {}, \
            f"{name} has module objects that are not its submodules"
    assert fresh["svod"]["comm"] == "svod.comm"
