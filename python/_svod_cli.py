"""The `svod` command of the pip-installed package: runs the real svod command shipped inside it.

pip makes <environment>/bin/svod from pyproject.toml's [project.scripts]; it calls main(), which
replaces its process (os.execv) with svod/svod, the C++ command that setup.py puts into the
package beside libsvod_runtime and the plugins. Its RPATH $ORIGIN finds the runtime there, and the
runtime finds its plugins (libsvod_llvm.so, ...) beside itself, as for the extension svod._svod.
Being replaced, not a parent, this process leaves the arguments, standard streams, exit status
and signals to the command itself.

Why a console script that execs the binary, not the binary itself in bin/ (setuptools' scripts):
in bin/ it would need an RPATH naming the package folder relative to bin/, and that differs with
the installation scheme (a virtual environment's lib/python3.X/site-packages, Debian's
/usr/local/lib/python3.X/dist-packages, ~/.local with --user, --target, --prefix), which a wheel
built once cannot know; the console script asks the interpreter where the package is.

Why a top-level module, not svod._cli: importing anything in the package svod runs
svod/__init__.py first, which loads numpy and the extension (about half a second), a cost every
`svod --version` would pay; this module imports only os, signal and sys.
"""
import os
import signal
import sys


def main() -> int:
    # The wheel installs this module beside the package svod, whatever the scheme: the command is
    # the one of the same installation, even where PYTHONPATH names another svod first.
    command = os.path.join(os.path.dirname(os.path.abspath(__file__)), "svod", "svod")
    if not (os.path.isfile(command) and os.access(command, os.X_OK)):
        print(f"svod: no svod command at {command}: reinstall the svod package with pip", file=sys.stderr)
        return 127
    # Python ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals ignored: the command gets
    # their defaults back, as from a shell (`svod ... | head` ends it quietly).
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execv(command, sys.argv)
    except OSError as error:
        print(f"svod: cannot run {command}: {error.strerror}", file=sys.stderr)
        return 126


if __name__ == "__main__":
    sys.exit(main())
