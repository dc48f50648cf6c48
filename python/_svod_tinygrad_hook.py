"""tinygrad finds svod's device SVOD with nothing but DEV=SVOD: no `import svod.tinygrad` first.

tinygrad opens a device X by importing the module tinygrad.runtime.ops_x, and tinygrad has no
ops_svod. Every installation of svod (pip, `cmake --install`, the Debian package) puts
svod_tinygrad.pth and this module into the folder of packages. Python's site module runs the .pth
file's one line at start-up; it appends to sys.meta_path a finder of a few bytes
(_svod_tinygrad_hook.SvodTinygradFinder) and imports nothing, this module included, so a program
that never uses tinygrad pays for one short line and never loads svod, numpy or tinygrad. The
finders before it (Python's path finder among them) answer every import they can, so that
finder is asked only about modules nothing else finds; it answers None at once for every name
but tinygrad.runtime.ops_svod, which only an installed tinygrad asks for, and for that name it
imports this module and returns find_spec's spec: Loader then makes svod.tinygrad, svod's
backend, that module.

Folders named by PYTHONPATH are not site folders: Python runs no .pth file there (nor with -S),
so a build tree or a prefix reached through PYTHONPATH still needs `import svod.tinygrad`. Two
installations seen by one interpreter append two such finders; the first answers.
"""
import sys

MODULE = "tinygrad.runtime.ops_svod"  # what tinygrad imports for the device SVOD
BACKEND = "svod.tinygrad"  # svod's tinygrad backend, which becomes MODULE


class Loader:
    """The loader of MODULE (static methods: the class is the loader)."""

    @staticmethod
    def create_module(spec):
        return None  # Python's default module, which exec_module replaces

    @staticmethod
    def exec_module(module):
        # The import system returns what sys.modules holds under the name once exec_module
        # returns, so MODULE is svod.tinygrad itself, never a second copy of it: its classes are
        # the ones `import svod.tinygrad` gives. The backend's own
        # `sys.modules.setdefault(MODULE, ...)` finds this placeholder there and leaves it. An
        # error importing the backend (svod or numpy missing) reaches tinygrad's import as it
        # is, and Python removes the placeholder.
        import importlib
        sys.modules[module.__name__] = importlib.import_module(BACKEND)


def find_spec(name, path=None, target=None):
    """The spec of MODULE, loaded by Loader; None for any other name."""
    if name != MODULE:
        return None
    from importlib.machinery import ModuleSpec
    return ModuleSpec(name, Loader)
