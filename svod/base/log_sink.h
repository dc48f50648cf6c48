// Where svod's log lines go (log.h writes them): stderr by default, or a sink
// an embedding program installs — the C API's svod_set_log_callback and
// Python's svod.log_to_python() are sinks over this.
//
// What never goes to a sink: the reports written just before svod ends the
// process or from a signal handler — a kernel fault the handler cannot stop
// (svod/backends/cpu/fault_handler.cpp), an op past SVOD_OP_TIMEOUT
// (svod/guard/op_deadline.cpp) — which keep writing to stderr with
// async-signal-safe calls, and the CLI's own output and progress lines.
#pragma once

#include <functional>
#include <string_view>

namespace svod {

// The level of a line. The values are Python logging's (DEBUG 10, WARNING
// 30); levels between and above may be added.
enum class LogLevel : int {
  Debug = 10,    // SVOD_DEBUG output (log_debug, log_line)
  Warning = 30,  // log_warning
};

// Receives each line svod logs, instead of stderr: its level and its text
// without the "svod: " prefix and without a trailing newline (a message may
// still hold newlines inside: sources, disassembly, compiler logs).
// line.data()[line.size()] is '\0', so the text can be handed to C as is.
//
// Lines come from any thread (callers', the thread pool's, compile and
// communication threads), and several threads may call the sink at once:
// svod holds no lock of its own while it runs, so the sink must be
// thread-safe itself. It may be called while svod holds internal locks, so it
// should not call into svod other than to log (it must not wait for another
// thread that is inside svod). An exception it throws is swallowed and the
// line written to stderr instead.
//
// Re-entrancy: a line logged while the sink is running on the same thread
// (the sink logs through svod, or calls something that does) is not passed
// to any sink: it goes to stderr, so a sink is never entered twice on one
// thread and cannot recurse or deadlock on itself.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

// Installs `sink` for every later line of the process; an empty sink puts
// stderr back. Thread-safe. Called from outside any sink, it returns once no
// thread is still in a call of the sink it replaced (so what that sink uses
// may be freed after it); it must then not be called while holding a lock
// that the replaced sink's calls wait for. Called from inside a sink, it does
// not wait (it cannot wait for its own caller): the replaced sink may still
// be running on other threads, and is destroyed after its last call.
void set_log_sink(LogSink sink);

// Whether a sink is installed.
bool log_sink_installed() noexcept;

// Writes "svod: `message`\n" to stderr in one write, whatever sink is
// installed: for a sink that cannot take a line (an interpreter shutting
// down) to pass it on.
void log_to_stderr(std::string_view message) noexcept;

}  // namespace svod
