"""svod.log_to_python(): svod's log lines reach the logging logger "svod" — from threads Python does not
know and from Python threads, each line whole — instead of stderr; log_to_python(False) puts stderr
back; a handler that logs through svod or turns the bridge off does not deadlock; exit and fork with
lines in flight are clean."""
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import svod
from conftest import ADD_BUFFERS, ADD_SOURCE, python_exits_cleanly

_log = svod._svod._log


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []
        self.records_lock = threading.Lock()  # (not `lock`: that is the handler's own)

    def emit(self, record):
        with self.records_lock:
            self.records.append(record)

    def messages(self):
        with self.records_lock:
            return [r.getMessage() for r in self.records]


@pytest.fixture
def collected():
    logger = logging.getLogger("svod")
    handler = Collect()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    svod.log_to_python()
    try:
        yield handler
    finally:
        svod.log_to_python(False)
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_lines_from_threads_python_does_not_know_all_arrive_whole(collected, capfd):
    payload = "x" * 300
    warnings = [f"warning {i} {payload}" for i in range(2000)]
    debug = [f"debug {i}\n" for i in range(500)]  # the trailing newline is not part of the line
    _log(warnings, "warning", threads=8)
    _log(debug, "debug", threads=3)
    svod.flush_log()
    records = list(collected.records)
    assert sorted(r.getMessage() for r in records) == sorted(warnings + [d.rstrip("\n") for d in debug])
    assert all(r.name == "svod" for r in records)
    assert {r.getMessage().split()[0]: r.levelno for r in records} == {"warning": logging.WARNING,
                                                                       "debug": logging.DEBUG}
    assert capfd.readouterr().err == ""


def test_the_delivery_thread_hands_lines_over_without_a_flush(collected):
    lines = [f"line {i}" for i in range(400)]
    _log(lines, threads=4)
    deadline = time.monotonic() + 30
    while len(collected.messages()) < len(lines) and time.monotonic() < deadline:
        time.sleep(0.01)  # lets the GIL go
    assert sorted(collected.messages()) == sorted(lines)


def test_lines_from_python_threads(collected):
    def work(k):
        _log([f"python thread {k} line {i}" for i in range(50)])  # with the GIL held

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    svod.flush_log()
    assert len(collected.messages()) == 200
    # One thread's lines keep their order.
    mine = [m for m in collected.messages() if m.startswith("python thread 2 ")]
    assert mine == [f"python thread 2 line {i}" for i in range(50)]


def test_log_to_python_false_puts_stderr_back(collected, capfd):
    _log(["to logging"])
    svod.log_to_python(False)  # hands over what waits, then stderr
    _log(["to stderr"])
    _log(["to stderr from a thread"], threads=1)
    assert collected.messages() == ["to logging"]
    assert capfd.readouterr().err == "svod: to stderr\nsvod: to stderr from a thread\n"
    svod.log_to_python()
    _log(["to logging again"], threads=1)
    svod.flush_log()
    assert collected.messages() == ["to logging", "to logging again"]


def test_a_handler_that_logs_through_svod_does_not_deadlock(collected, capfd):
    class Echo(logging.Handler):
        def emit(self, record):
            _log([f"inner for {record.getMessage()}"])  # to stderr, not back into logging
            svod.flush_log()  # from inside a handler: returns at once

    echo = Echo()
    logging.getLogger("svod").addHandler(echo)
    try:
        _log(["outer a", "outer b"], threads=2)
        _log(["outer c"])
        svod.flush_log()
    finally:
        logging.getLogger("svod").removeHandler(echo)
    assert sorted(collected.messages()) == ["outer a", "outer b", "outer c"]
    err = capfd.readouterr().err
    assert sorted(err.splitlines()) == ["svod: inner for outer a", "svod: inner for outer b",
                                        "svod: inner for outer c"]


def test_a_handler_may_turn_the_bridge_off(collected, capfd):
    class Off(logging.Handler):
        def emit(self, record):
            svod.log_to_python(False)

    off = Off()
    logging.getLogger("svod").addHandler(off)
    try:
        _log(["first"], threads=1)
        svod.flush_log()
        _log(["second"])
    finally:
        logging.getLogger("svod").removeHandler(off)
    assert collected.messages() == ["first"]
    assert capfd.readouterr().err == "svod: second\n"


def test_debug_lines_of_svod_debug_reach_logging():
    code = textwrap.dedent(f"""
        import logging, sys, svod
        logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s %(levelname)s %(message)s")
        svod.log_to_python()
        svod.device("CPU").compile(source={ADD_SOURCE!r} + "// test_log {time.time_ns()}", entry="add",
                                   buffers={ADD_BUFFERS!r}, scalars=[{{"name": "n", "type": "i32"}}])
        svod.flush_log()
        print("done")
    """)
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, "SVOD_DEBUG": "1"},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "svod DEBUG kernel cache: compiled" in run.stdout, run.stdout
    assert "svod: kernel cache" not in run.stderr, run.stderr
    assert run.stdout.rstrip().endswith("done")


def test_exit_while_lines_are_in_flight_is_clean():
    # Daemon threads and svod's own threads go on logging while the interpreter exits, with a handler
    # slow enough that the delivery thread is inside it.
    python_exits_cleanly(textwrap.dedent("""
        import logging, threading, time, svod
        class Slow(logging.Handler):
            def emit(self, record):
                time.sleep(0.001)
        logging.getLogger("svod").addHandler(Slow())
        logging.getLogger("svod").propagate = False
        svod.log_to_python()
        def spin():
            while True:
                svod._svod._log(["from a daemon"] * 50, threads=3)
        for _ in range(2):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.2)
    """), times=3)


def test_a_forked_child_gets_its_lines():
    code = textwrap.dedent("""
        import logging, os, time, svod
        got = []
        class Keep(logging.Handler):
            def emit(self, record):
                got.append(record.getMessage())
        logging.getLogger("svod").addHandler(Keep())
        logging.getLogger("svod").propagate = False
        svod.log_to_python()
        svod._svod._log(["parent"], threads=2)
        svod.flush_log()
        assert got == ["parent"], got
        pid = os.fork()
        if pid == 0:
            svod._svod._log(["child"] * 10, threads=2)
            deadline = time.monotonic() + 20
            while len(got) < 11 and time.monotonic() < deadline:
                time.sleep(0.01)  # the child's own delivery thread hands them over
            os._exit(0 if got == ["parent"] + ["child"] * 10 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
    """)
    run = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", code], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
