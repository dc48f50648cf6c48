"""Every code snippet of README.md runs as written against the build tree
(SVOD_BINARY_DIR): its Python, C++, C and shell blocks.

Fenced blocks without a language are what svod prints, not commands. The block of two commands that
opens the README is what CI itself runs (.ci/run: install, configure, build, test), so it is checked
for being that, not run again from inside the tests.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BINARY_DIR = pathlib.Path(os.environ.get("SVOD_BINARY_DIR", REPO / "build" / "release"))
TINYGRAD_DIR = pathlib.Path(os.environ.get("SVOD_TINYGRAD_DIR", REPO.parent / "shared" / "tinygrad"))


def snippets():
    """(language, code, line) of every fenced block of README.md with a language."""
    text = (REPO / "README.md").read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"^```(\w+)\n(.*?)^```$", text, re.M | re.S)]


SNIPPETS = snippets()


def of(language):
    return pytest.mark.parametrize("code,line", [(c, n) for lang, c, n in SNIPPETS if lang == language],
                                   ids=lambda v: "line%d" % v if isinstance(v, int) else "")


def run(args, cwd=REPO, **kwargs):
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, "%s\n%s%s" % (args, result.stdout[-3000:], result.stderr[-3000:])
    return result


def test_every_snippet_has_a_language_these_tests_run():
    languages = [lang for lang, _, _ in SNIPPETS]
    assert set(languages) <= {"bash", "sh", "python", "cpp", "c"}, languages
    assert languages.count("python") >= 3 and "cpp" in languages and "c" in languages, languages
    # The opening block: the two commands CI runs.
    lang, code, line = SNIPPETS[0]
    assert (lang, line) == ("bash", 3)
    commands = code.splitlines()
    assert len(commands) == 2 and commands[0].endswith("./build/release/svod run examples/mlp/plan.json")
    assert commands[1].endswith("ctest --preset release")


@of("python")
def test_python_snippet_runs(code, line, tmp_path):
    # In a scratch folder that sees the repository's examples, so that what a snippet writes
    # (an exported package) stays out of the source tree.
    (tmp_path / "examples").symlink_to(REPO / "examples")
    env = dict(os.environ, PYTHONPATH=str(BINARY_DIR / "python"))
    if "tinygrad" in code:
        if not (TINYGRAD_DIR / "tinygrad" / "__init__.py").is_file():
            pytest.skip(f"tinygrad is not at {TINYGRAD_DIR} (SVOD_TINYGRAD_DIR)")
        env["PYTHONPATH"] += os.pathsep + str(TINYGRAD_DIR)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    run([sys.executable, "-c", code], cwd=tmp_path, env=env)


@of("cpp")
def test_cpp_snippet_builds_and_runs(code, line, tmp_path):
    (tmp_path / "snippet.cpp").write_text(code)
    runtime = BINARY_DIR / "runtime"
    run(["c++", "-std=c++20", "-O1", "-I", str(REPO), str(tmp_path / "snippet.cpp"), "-o", str(tmp_path / "snippet"),
         "-L", str(runtime), "-Wl,-rpath," + str(runtime), "-lsvod_runtime", "-lfmt", "-ltbb"])
    assert run([str(tmp_path / "snippet")]).stdout == "o[0] = 3\n"


@of("c")
def test_c_snippet_builds_and_runs(code, line, tmp_path):
    (tmp_path / "snippet.c").write_text(code)
    capi = BINARY_DIR / "runtime" / "capi"
    run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(BINARY_DIR / "capi_include"), str(tmp_path / "snippet.c"),
         "-o", str(tmp_path / "snippet"), "-L", str(capi), "-Wl,-rpath," + str(capi), "-lsvod_c"])
    assert run([str(tmp_path / "snippet")]).stdout == "o[3] = 8\n"


@of("sh")
def test_shell_snippet_runs(code, line):
    # One command a line, `\` continuing it; the build tree wherever SVOD_BINARY_DIR says.
    for command in code.replace("\\\n", " ").splitlines():
        if "mpirun" in command and shutil.which("mpirun") is None:
            continue  # without OpenMPI the README's mpirun lines cannot run (scripts/install-deps.sh installs it)
        run(["bash", "-c", command.replace("build/release/", str(BINARY_DIR) + "/")])
