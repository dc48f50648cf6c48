"""Prints where, relative to PREFIX, this interpreter looks for packages installed under PREFIX.

Usage: python3 -I svod_python_site.py PREFIX

`cmake --install` (and cpack) run it with the prefix they install into, so the svod package
lands where the interpreter imports it from: Debian's /usr/bin/python3 looks in
/usr/lib/python3/dist-packages and /usr/local/lib/python3.X/dist-packages, not in the
lib/python3.X/site-packages that other interpreters use, and a virtual environment in its own
lib/python3.X/site-packages. Among the site folders on sys.path under PREFIX the one nearest
to it wins (for /usr: lib/python3/dist-packages, not local/lib/python3.X/dist-packages); a
prefix the interpreter never looks in gets the standard lib/python3.X/site-packages (then
PYTHONPATH has to name it).
"""
import os
import site
import sys
import sysconfig


def site_folder(prefix: str) -> str:
    prefix = os.path.normpath(os.path.abspath(prefix))
    looked_in = list(sys.path)
    if hasattr(site, "getsitepackages"):
        looked_in += site.getsitepackages()
    found = []
    for entry in looked_in:
        entry = os.path.normpath(os.path.abspath(entry)) if entry else ""
        if os.path.basename(entry) not in ("site-packages", "dist-packages"):
            continue
        if os.path.commonpath([prefix, entry]) != prefix or entry in found:
            continue
        found.append(entry)
    if found:
        # Nearest first; equally near ones in the order the interpreter searches them.
        best = min(found, key=lambda entry: len(os.path.relpath(entry, prefix).split(os.sep)))
        return os.path.relpath(best, prefix)
    paths = {"base": prefix, "platbase": prefix, "installed_base": prefix, "installed_platbase": prefix}
    return os.path.relpath(sysconfig.get_path("platlib", "posix_prefix", paths), prefix)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(site_folder(sys.argv[1]))
