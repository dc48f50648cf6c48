// svod.log_to_python() and svod.flush_log(): svod's log lines (the sink of
// svod/base/log_sink.h) handed to the `logging` logger "svod".
//
// The sink never touches Python: lines come from any thread — the pool's,
// compile and communication threads, a Python thread inside a call that
// released the GIL, or one that holds it, possibly with svod's own locks
// held — and taking the GIL there could wait for a thread that holds it and
// waits for this one (a cached compile waiting on another thread's build,
// say). So the sink only queues the line, and one thread of svod's own
// takes the GIL (GilAcquired: it parks, never unwinds, once the interpreter
// is finalizing) and hands queued lines to `logging` in order, as soon as
// it gets it; flush_log() hands them over on the calling thread. At exit
// (atexit, before the interpreter finalizes) the sink is taken out and the
// rest handed over (for a second at most, then to stderr), so nothing calls
// into Python afterwards.
#include "bindings.h"

#include <Python.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "svod/base/log.h"
#include "svod/base/log_sink.h"

namespace svod::python {

void bind_log(py::module_& m);

namespace {

struct Line {
  LogLevel level;
  std::string text;
};

// More lines than this waiting (the GIL held for a long time, or handlers
// slower than svod logs) go to stderr instead of piling up.
constexpr size_t kMaxQueued = 4096;
// At exit, lines still waiting after this long go to stderr: exit is never
// held up by a slow handler for more than a moment.
constexpr auto kExitDelivery = std::chrono::seconds(1);

std::mutex queue_mutex;
// A pointer, so that the child of a fork can start with a new one: the old
// one's waiter (the delivery thread) does not exist there.
std::condition_variable* queue_ready = new std::condition_variable;
std::deque<Line>& queue = *new std::deque<Line>;  // guarded by queue_mutex; never destroyed (threads log at exit)
bool delivering = false;        // one thread hands lines over at a time (in order); guarded
// Set at exit: lines handed over after it go to stderr; guarded.
constexpr auto kNoDeadline = std::chrono::steady_clock::time_point::max();
std::chrono::steady_clock::time_point deliver_until = kNoDeadline;
bool thread_running = false;    // the delivery thread exists; guarded
bool enabled = false;           // log_to_python(True) is in effect (GIL)
bool exited = false;            // the atexit hook ran (GIL)
bool atexit_registered = false; // (GIL)
PyObject* logger_log = nullptr; // logging.getLogger("svod").log; kept for the process (GIL)
thread_local bool handing_over = false;  // this thread is inside a `logging` call for a line

// Hands `line` to logging.getLogger("svod").log (GIL held). A failing
// handler is reported as unraisable, as logging does for its own errors.
void hand_over(const Line& line) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* pending = PyErr_GetRaisedException();
#else
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
#endif
  PyObject* text = PyUnicode_DecodeUTF8(line.text.data(), static_cast<Py_ssize_t>(line.text.size()), "replace");
  PyObject* result = text ? PyObject_CallFunction(logger_log, "iO", static_cast<int>(line.level), text) : nullptr;
  if (result == nullptr) PyErr_WriteUnraisable(logger_log);
  Py_XDECREF(result);
  Py_XDECREF(text);
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(pending);
#else
  PyErr_Restore(type, value, traceback);
#endif
}

// Hands every queued line over, on this thread (GIL held), until the queue
// is empty; past `deliver_until`, what is left goes to stderr. Called again
// from inside a handler on the same thread it returns at once: the call
// below it goes on with the queue.
void deliver_queued() {
  if (handing_over || logger_log == nullptr) return;
  for (;;) {
    {
      std::lock_guard lock(queue_mutex);
      if (!delivering) {
        delivering = true;
        break;
      }
    }
    // Another thread is handing a line over (its handler let the GIL go).
    {
      GilReleased unlocked;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C while a handler hangs
  }
  for (;;) {
    Line line;
    std::chrono::steady_clock::time_point until;
    {
      std::lock_guard lock(queue_mutex);
      if (queue.empty()) {
        delivering = false;
        return;
      }
      line = std::move(queue.front());
      queue.pop_front();
      until = deliver_until;
    }
    if (until != kNoDeadline && std::chrono::steady_clock::now() > until) [[unlikely]] {
      log_to_stderr(line.text);
      continue;
    }
    handing_over = true;
    hand_over(line);
    handing_over = false;
  }
}

// The delivery thread: waits (without the GIL) for lines, then takes the
// GIL and hands them over. Not noexcept anywhere: before Python 3.14, CPython
// ends a thread that takes the GIL during finalization with pthread_exit,
// whose unwinding must reach this thread's start.
void* delivery_thread(void*) {
  for (;;) {
    {
      std::unique_lock lock(queue_mutex);
      queue_ready->wait(lock, [] { return !queue.empty(); });
    }
    GilAcquired gil;
    deliver_queued();
  }
  return nullptr;
}

// Starts the delivery thread (queue_mutex held), with asynchronous signals
// blocked so that they go to the interpreter's threads. False if it cannot.
bool start_delivery_thread() {
  sigset_t all, previous;
  sigfillset(&all);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigdelset(&all, sig);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t thread;
  const bool started = pthread_create(&thread, nullptr, delivery_thread, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (started) pthread_detach(thread);
  return started;
}

// The sink: queues the line for the delivery thread. Never takes the GIL.
void queue_line(LogLevel level, std::string_view text) {
  if (handing_over) {
    // Logged by a handler of the "svod" logger (through svod): not fed back.
    log_to_stderr(text);
    return;
  }
  {
    std::lock_guard lock(queue_mutex);
    if (queue.size() < kMaxQueued && (thread_running || (thread_running = start_delivery_thread()))) {
      queue.push_back(Line{level, std::string(text)});
      queue_ready->notify_one();
      return;
    }
  }
  log_to_stderr(text);
}

// A fork keeps only the forking thread: no thread holds the queue's lock
// across it, and the child starts its own delivery thread at its first line.
void before_fork() { queue_mutex.lock(); }
void after_fork_parent() { queue_mutex.unlock(); }
void after_fork_child() {
  queue_ready = new std::condition_variable;  // the old one's waiter is not in the child
  thread_running = false;
  delivering = false;
  queue_mutex.unlock();
}

// Puts stderr back and hands over what is still queued (GIL held).
void stop() {
  if (enabled) {
    enabled = false;
    // Waits for calls of the sink on other threads, which never wait for
    // the GIL.
    GilReleased unlocked;
    set_log_sink(nullptr);
  }
  deliver_queued();
}

void log_to_python(bool enable) {
  if (!enable) return stop();
  if (exited) return;  // the interpreter is on its way out: stderr stays
  py::object log = py::module_::import("logging").attr("getLogger")("svod").attr("log");
  if (!atexit_registered) {
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    py::module_::import("atexit").attr("register")(py::cpp_function([] {
      exited = true;
      {
        std::lock_guard lock(queue_mutex);
        deliver_until = std::chrono::steady_clock::now() + kExitDelivery;
      }
      stop();
    }));
    atexit_registered = true;
  }
  PyObject* previous = logger_log;
  logger_log = log.release().ptr();
  Py_XDECREF(previous);
  enabled = true;
  GilReleased unlocked;  // the sink it replaces may be running (and waiting for the GIL)
  set_log_sink(queue_line);
}

LogLevel level_argument(py::handle obj) {
  const std::string name = string_argument(obj, "_log: level");
  if (name == "debug") return LogLevel::Debug;
  if (name == "warning") return LogLevel::Warning;
  throw make_error(ErrorKind::Validation, "_log: level \"{}\": expected \"debug\" or \"warning\"", name);
}

void log_as(LogLevel level, const std::string& line) {
  if (level == LogLevel::Warning) log_warning(line);
  else log_line(line);
}

}  // namespace

void bind_log(py::module_& m) {
  m.def(
      "log_to_python", [](py::handle enable) { log_to_python(bool_argument(enable, "log_to_python: enable")); },
      py::arg("enable") = true,
        "Sends svod's log lines to the logging logger \"svod\" instead of stderr: warnings as WARNING,\n"
        "the output of SVOD_DEBUG as DEBUG, each message without the \"svod: \" prefix. Lines logged on\n"
        "svod's threads (or inside calls that release the GIL) are handed to logging by a thread of\n"
        "svod's as soon as it gets the GIL; svod.flush_log() hands over what is still waiting (at most\n"
        "4096 lines wait: more go to stderr). enable=False puts stderr back, after handing over the\n"
        "lines logged until then; so does interpreter exit (for at most a second). A line svod logs\n"
        "while a handler of the \"svod\" logger runs on the same thread goes to stderr, never back to the\n"
        "handler. Replaces a callback installed through the C API (svod_set_log_callback).");
  m.def("flush_log", [] { deliver_queued(); },
        "Hands every svod log line still waiting to logging, on this thread, before it returns (after\n"
        "svod.log_to_python()); a no-op otherwise.");
  // For the tests (tests/python/test_log.py): logs `lines` on this thread
  // with the GIL held (threads=0), or from `threads` new threads that Python
  // does not know, thread k logging lines[k::threads], the GIL released
  // until they finish.
  m.def(
      "_log",
      [](const std::vector<std::string>& lines, py::handle level, int threads) {
        const LogLevel lv = level_argument(level);
        if (threads <= 0) {
          for (const std::string& line : lines) log_as(lv, line);
          return;
        }
        GilReleased unlocked;
        std::vector<std::thread> started;
        for (int t = 0; t < threads; ++t) {
          started.emplace_back([&, t] {
            for (size_t i = static_cast<size_t>(t); i < lines.size(); i += static_cast<size_t>(threads))
              log_as(lv, lines[i]);
          });
        }
        for (auto& thread : started) thread.join();
      },
      py::arg("lines"), py::arg("level") = "warning", py::arg("threads") = 0);
}

}  // namespace svod::python
