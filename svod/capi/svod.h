/* svod's C API: compile and launch kernels, move data, run plan files and
 * combine buffers across the ranks of a job, from C or from any language
 * with a C FFI (Rust, Go, Julia, Python's ctypes).
 * Installed as <svod/svod.h>; link libsvod_c (CMake: svod::c; pkg-config:
 * svod).
 *
 * Stability. The ABI of libsvod_c.so.N stays compatible for every minor
 * version of major version N: functions and error kinds are only added,
 * never changed or removed, handles are opaque, and what grows (program specs,
 * plan variables) is passed as JSON text. A program compiled against an older
 * header of the same major version keeps working with a newer library; check
 * svod_api_version() against SVOD_API_VERSION at start-up when you need the
 * functions of a newer minor version.
 *
 * Errors. Every fallible function returns an svod_status*: NULL on success,
 * else a status the caller reads with svod_status_kind() and
 * svod_status_message() and frees with svod_status_free(). Out-parameters are
 * written only on success. No C++ exception leaves the library and no
 * function aborts on bad input: NULL handles, NULL strings, bad JSON, unknown
 * names and out-of-range values all return statuses.
 *
 * Handles. svod_device, svod_buffer, svod_program, svod_plan and svod_comm
 * are opaque and single-owner: each function that returns one (through an out-parameter)
 * gives the caller a handle to release exactly once with its release
 * function. What a handle refers to is shared and reference-counted inside
 * svod, so releasing a handle never invalidates others: a program keeps its
 * device alive, a plan keeps its buffers and its communicator alive, and a
 * buffer handle taken from a plan stays valid after the plan is released. A release of a handle
 * that is not live (released already, or never returned by svod) is detected
 * and returns SVOD_ERROR_VALIDATION without touching the pointer — unless a
 * newer handle has since been given the same address, which no check can
 * tell apart. Passing a released handle to any other function is undefined
 * behaviour (those functions do not pay for the check).
 *
 * Threads. Unless a function says otherwise, it may be called from any
 * thread, and concurrently with calls on other handles. Per-function notes
 * say what may run concurrently on one handle.
 */
#ifndef SVOD_SVOD_H
#define SVOD_SVOD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header declares: major * 1000 + minor. */
#define SVOD_API_VERSION_MAJOR 1
#define SVOD_API_VERSION_MINOR 11
#define SVOD_API_VERSION (SVOD_API_VERSION_MAJOR * 1000 + SVOD_API_VERSION_MINOR)

#if defined(SVOD_C_BUILDING)
#define SVOD_C_EXPORT __attribute__((visibility("default")))
#else
#define SVOD_C_EXPORT
#endif

/* The version of the loaded library, as SVOD_API_VERSION. A caller built
 * against header version H may use the library when svod_api_version() / 1000
 * == H / 1000 and svod_api_version() >= H. */
SVOD_C_EXPORT int svod_api_version(void);

/* ---- Statuses ------------------------------------------------------------ */

typedef struct svod_status svod_status;

/* What went wrong; the values mirror svod::ErrorKind. New kinds may be added
 * in minor versions: treat an unknown kind like SVOD_ERROR_INTERNAL. */
typedef enum svod_error_kind {
  SVOD_OK = 0,                        /* svod_status_kind(NULL): no error */
  SVOD_ERROR_VALIDATION = 1,          /* bad arguments, specs, names, counts, bounds */
  SVOD_ERROR_COMPILE = 2,             /* the compiler rejected the source; its log is in the message */
  SVOD_ERROR_LOAD = 3,                /* a compiled object could not be loaded */
  SVOD_ERROR_UNDEFINED_SYMBOL = 4,    /* the object lacks a symbol it needs, or its entry */
  SVOD_ERROR_UNSUPPORTED = 5,         /* a valid request this build or device cannot serve */
  SVOD_ERROR_DEVICE_UNAVAILABLE = 6,  /* device, driver or toolchain not present */
  SVOD_ERROR_EXECUTION = 7,           /* a kernel, copy or host function failed while running */
  SVOD_ERROR_PLAN_POISONED = 8,       /* a plan failed mid-run; load it again */
  SVOD_ERROR_TIMEOUT = 9,             /* a process or operation ran past its time limit */
  SVOD_ERROR_IO = 10,                 /* files, pipes, processes */
  SVOD_ERROR_INTERNAL = 11,           /* a bug in svod, or out of memory */
  SVOD_ERROR_KERNEL_FAULT = 12,       /* (1.5) a CPU kernel faulted and was stopped; the message says where */
  SVOD_ERROR_SANDBOX_VIOLATION = 13   /* (1.9) a sandboxed kernel broke a rule of its sandbox; the message names it */
} svod_error_kind;

/* The kind of `status`; SVOD_OK for NULL. Thread-safe. */
SVOD_C_EXPORT svod_error_kind svod_status_kind(const svod_status* status);
/* What failed, where, and what to do about it; "" for NULL. The text lives as
 * long as the status. Thread-safe. */
SVOD_C_EXPORT const char* svod_status_message(const svod_status* status);
/* A short lower-case name of a kind ("validation", "compile", ...). */
SVOD_C_EXPORT const char* svod_error_kind_name(svod_error_kind kind);
/* Frees a status; NULL is a no-op. Each status is freed once. */
SVOD_C_EXPORT void svod_status_free(svod_status* status);

/* ---- Devices ------------------------------------------------------------- */

typedef struct svod_device svod_device;

/* Opens a device by name: "CPU", "CL:0", "CUDA:0" ("CL" means "CL:0"; kinds
 * are case-insensitive). Each device exists once per process; every call
 * returns a new handle to it. Errors: VALIDATION for a malformed name or
 * unknown kind, DEVICE_UNAVAILABLE when the device or its driver is absent.
 * Thread-safe. */
SVOD_C_EXPORT svod_status* svod_device_get(const char* name, svod_device** out);
/* The device's canonical name ("CPU", "CL:0"), alive as long as the handle;
 * NULL for a NULL handle. Thread-safe. */
SVOD_C_EXPORT const char* svod_device_name(const svod_device* device);
/* Releases the handle (the device lives on while programs or buffers use it).
 * Not concurrently with other calls on this handle. */
SVOD_C_EXPORT svod_status* svod_device_release(svod_device* device);

/* ---- Buffers ------------------------------------------------------------- */

typedef struct svod_buffer svod_buffer;

/* dtype names: "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64",
 * "f16", "bf16", "f32", "f64" (and numpy's "float32", "int64", ...). */

/* Allocates `count` zero-filled elements of `dtype` on `device`. Errors:
 * VALIDATION for an unknown dtype or a zero or too large count, INTERNAL or
 * the device's kind when memory runs out. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_buffer_allocate(svod_device* device, const char* dtype, size_t count,
                                                svod_buffer** out);
/* A CPU buffer over the caller's memory, without copying: kernels read and
 * write `data` directly. The caller keeps the memory alive, and aligned to
 * the dtype's size, until every handle and plan using it is released.
 * Thread-safe. */
SVOD_C_EXPORT svod_status* svod_buffer_wrap_host(void* data, const char* dtype, size_t count, svod_buffer** out);
/* Copies `bytes` bytes (the buffer's whole size) from host memory into the
 * buffer, on any device. Not concurrently with launches or plans using it. */
SVOD_C_EXPORT svod_status* svod_buffer_copy_from_host(svod_buffer* buffer, const void* src, size_t bytes);
/* Copies the whole buffer (`bytes` must be its size) into host memory. Safe
 * concurrently with other readers of the buffer. */
SVOD_C_EXPORT svod_status* svod_buffer_copy_to_host(const svod_buffer* buffer, void* dst, size_t bytes);
/* The host address of a host-visible buffer (CPU buffers, wrapped memory);
 * UNSUPPORTED for device memory (use the copy functions). Thread-safe. */
SVOD_C_EXPORT svod_status* svod_buffer_data(const svod_buffer* buffer, void** out);
/* (1.2) A buffer of `count` elements of `dtype` starting `byte_offset` bytes
 * into `base`, sharing its memory on any device (usable wherever a buffer
 * is; the memory lives while any handle or plan uses it). Errors: VALIDATION
 * for an unknown dtype, a zero count, or a range that leaves `base`.
 * Thread-safe. */
SVOD_C_EXPORT svod_status* svod_buffer_view(const svod_buffer* base, size_t byte_offset, const char* dtype,
                                            size_t count, svod_buffer** out);
/* Element count, size in bytes and dtype name ("f32") of a buffer; 0, 0 and
 * NULL for a NULL handle. Thread-safe. */
SVOD_C_EXPORT size_t svod_buffer_count(const svod_buffer* buffer);
SVOD_C_EXPORT size_t svod_buffer_bytes(const svod_buffer* buffer);
SVOD_C_EXPORT const char* svod_buffer_dtype(const svod_buffer* buffer);
/* Releases the handle; the memory is freed with the last handle or plan
 * using it. Not concurrently with other calls on this handle. */
SVOD_C_EXPORT svod_status* svod_buffer_release(svod_buffer* buffer);

/* ---- Programs ------------------------------------------------------------ */

typedef struct svod_program svod_program;

/* Compiles and loads a kernel for `device`. `spec_json` is one program object
 * exactly as under "programs" in a plan file: language, source or
 * source_file (relative to the working directory), entry, buffers, scalars,
 * global_size, local_size, defines, flops, bytes; sizes may name the
 * program's scalars. A "device" field, if present, must name `device`.
 * Each buffer entry may give "min_count": an integer or an expression string
 * over the program's scalars except core_id (e.g. "n" or "n * 4"), the number
 * of elements of its dtype (bytes without a dtype) the kernel touches, e.g.
 *   {"name": "o", "access": "write", "dtype": "f32", "min_count": "n"}
 * A launch whose buffer holds fewer, or whose count is more bytes than 64
 * bits hold, is refused before the kernel runs; without min_count svod cannot
 * tell how much of a buffer the kernel reads or writes.
 * Compiled objects are cached as for every svod program. Errors: VALIDATION
 * for malformed JSON, JSON nested more than 256 deep or a bad field (the
 * message names the field), IO for an unreadable source_file, COMPILE with
 * the compiler's log, LOAD and UNDEFINED_SYMBOL for objects that cannot be
 * loaded. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_program_compile(svod_device* device, const char* spec_json, svod_program** out);
/* Runs the kernel to completion. `buffers` in the spec's order; `scalars` for
 * every declared scalar except core_id (which svod sets for each parallel
 * slice), in declared order, each converted to the declared type. Checked
 * before anything runs: counts, NULL handles, buffer dtypes (a declared
 * dtype must match; a bf16 parameter also takes u16 bit patterns; u8 byte
 * storage serves any dtype it is aligned for), sizes
 * (min_count) and devices, scalar ranges, and the number of core_id slices
 * against core_id's bounds (VALIDATION). Thread-safe: one program may run on many
 * threads at once (on buffers they do not share for writing). */
SVOD_C_EXPORT svod_status* svod_program_launch(svod_program* program, svod_buffer* const* buffers,
                                               size_t n_buffers, const int64_t* scalars, size_t n_scalars);
/* (1.2) svod_program_launch with the launch sizes given for this launch
 * instead of the spec's: `global_size` and `local_size` each hold 3 sizes
 * (NULL keeps the spec's). On the CPU global_size[0] is the number of
 * core_id slices and the other sizes must be 1; on grid devices global_size
 * counts work-groups (blocks) and local_size work-items per group. Sizes
 * below 1, or core_id slices past core_id's bounds, are VALIDATION errors.
 * Thread-safe. */
SVOD_C_EXPORT svod_status* svod_program_launch_sized(svod_program* program, svod_buffer* const* buffers,
                                                     size_t n_buffers, const int64_t* scalars, size_t n_scalars,
                                                     const int64_t* global_size, const int64_t* local_size);
/* Releases the handle; the loaded code is freed once no plan uses it. Not
 * concurrently with other calls on this handle. */
SVOD_C_EXPORT svod_status* svod_program_release(svod_program* program);

/* ---- Plans --------------------------------------------------------------- */

typedef struct svod_plan svod_plan;

/* Loads a plan file (svod's JSON plan format): allocates and initialises its
 * buffers, compiles its programs and builds the plan. `vars_json` sets plan
 * variables, e.g. "{\"N\": 64}", or is NULL to keep the file's values.
 * vars_json, like the plan file, may nest arrays and objects at most 256
 * deep: deeper is VALIDATION, refused before it is parsed.
 * Errors: IO for unreadable files, VALIDATION naming the file and field,
 * DEVICE_UNAVAILABLE, COMPILE and the other compile kinds. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_plan_load(const char* path, const char* vars_json, svod_plan** out);
/* Loads an ahead-of-time package (made by `svod pack`, docs/PACKAGE_FORMAT.md)
 * from the `size` bytes at `data`, with no file and no temporary file. CPU
 * programs whose objects suit this machine load without compiling (so this
 * works under SVOD_COMPILE=0), and so do OpenCL programs whose packaged
 * binary is for this machine's device; others build from their packaged
 * source now. The bytes are only read during the call: the plan keeps
 * copies of what it needs. `vars_json` overrides the variable values the package was made
 * with, as for svod_plan_load. The result is a plan like svod_plan_load's.
 * Errors: VALIDATION for bytes that are not a package (the message says so)
 * and bad vars_json; LOAD for a truncated, corrupt or wrong-version package,
 * naming the section at fault; UNSUPPORTED when its CPU objects need
 * features this CPU lacks, or its OpenCL binaries are for another device,
 * and compiling is off (or SVOD_PACKAGE_REFUSE_CPU_MISMATCH refuses, below).
 * Added in API version 1.1.
 * Thread-safe, also on the same bytes. */
SVOD_C_EXPORT svod_status* svod_plan_load_package(const void* data, size_t size, const char* vars_json,
                                                  svod_plan** out);
/* As svod_plan_load_package, from a package file: the file is read once into
 * private memory and buffers use their initial data where it lies there (a
 * later change of the file reaches nothing loaded). IO when the file cannot
 * be read. Added in API version 1.1.
 * Thread-safe. */
SVOD_C_EXPORT svod_status* svod_plan_load_package_file(const char* path, const char* vars_json, svod_plan** out);
/* Sets a plan variable for the next executions (checked now against its
 * declared bounds: VALIDATION for an unknown name or an out-of-range value),
 * on every device, launch sizes included. Thread-safe: calls on one plan are
 * serialized. */
SVOD_C_EXPORT svod_status* svod_plan_set_var(svod_plan* plan, const char* name, int64_t value);
/* A new handle to the buffer now bound to the plan's buffer `name` (sharing
 * its memory). VALIDATION when the plan has no such buffer. Thread-safe:
 * calls on one plan are serialized. */
SVOD_C_EXPORT svod_status* svod_plan_buffer(svod_plan* plan, const char* name, svod_buffer** out);
/* Binds `buffer` in place of the plan's buffer `name` (same dtype, size and
 * device; views of it follow). The plan keeps the buffer alive. UNSUPPORTED
 * for a sandboxed plan (svod_plan_sandbox). Thread-safe: calls on one plan
 * are serialized. */
SVOD_C_EXPORT svod_status* svod_plan_bind(svod_plan* plan, const char* name, svod_buffer* buffer);
/* Runs every operation of the plan once, with independent operations in
 * parallel (a plan spanning devices puts each on its device's queue). A
 * failure while running returns its kind (EXECUTION, ...) and leaves the
 * plan poisoned: later executions return PLAN_POISONED until it is loaded
 * again, on every device. Thread-safe: calls on one plan are serialized. */
SVOD_C_EXPORT svod_status* svod_plan_execute(svod_plan* plan);
/* ---- Package load flags (1.9) ------------------------------------------- */

/* Flags for svod_plan_load_package_with_flags and
 * svod_plan_load_package_file_with_flags (and, SVOD_PACKAGE_SANDBOX only,
 * svod_plan_load_with_flags), or'ed together; 0 loads as
 * svod_plan_load_package does. */
typedef enum svod_package_flag {
  /* CPU objects this CPU cannot run (they need features it lacks, or are
   * for another architecture) make the load fail with UNSUPPORTED naming the
   * program and the features this CPU lacks. Without it they are compiled
   * from the package's sources (which needs clang). */
  SVOD_PACKAGE_REFUSE_CPU_MISMATCH = 1,
  /* (1.10) The plan runs sandboxed, as svod_plan_sandbox(plan, NULL) makes it
   * once loaded: the load fails (UNSUPPORTED, naming what is missing or the
   * op that cannot run there) rather than give a plan that runs unsandboxed. */
  SVOD_PACKAGE_SANDBOX = 2
} svod_package_flag;

/* svod_plan_load_package and svod_plan_load_package_file with `flags`
 * (svod_package_flag values); VALIDATION for a bit this library does not
 * know. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_plan_load_package_with_flags(const void* data, size_t size, const char* vars_json,
                                                             uint32_t flags, svod_plan** out);
SVOD_C_EXPORT svod_status* svod_plan_load_package_file_with_flags(const char* path, const char* vars_json,
                                                                  uint32_t flags, svod_plan** out);
/* (1.11) svod_plan_load with `flags`, of which a plan file takes only
 * SVOD_PACKAGE_SANDBOX: its C and LLVM IR sources are then compiled by the
 * sandbox's confined compiler (docs/SECURITY.md, "The sandbox"), never in
 * this process, and the plan runs sandboxed. An #include of a file outside
 * the toolchain is SANDBOX_VIOLATION naming it; UNSUPPORTED when confined
 * compiles or the sandbox cannot be had here, or for a program the confined
 * compiler does not take (another language, another device's kernel); any
 * other bit is VALIDATION. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_plan_load_with_flags(const char* path, const char* vars_json, uint32_t flags,
                                                     svod_plan** out);

/* ---- Sandboxed runs (1.10) ---------------------------------------------- */

/* Makes every later svod_plan_execute of `plan` run its kernels in svod's
 * sandbox (docs/SECURITY.md, "The sandbox"): a helper process that can do
 * nothing but compute on the plan's buffers, started now and kept between
 * runs. The plan's buffers move into memory shared with the helper now (a
 * copy of each, once); svod_plan_buffer and svod_plan_get_output see them
 * there, svod_plan_set_input copies into them, and svod_plan_bind is refused
 * (UNSUPPORTED): a buffer of the caller's would be outside the sandbox.
 * `options_json` is NULL for the defaults or an object with any of
 * "wall_limit_s" (seconds one execution may take, from 0.001 to 86400, 60 by
 * default; past it the helper is killed) and "memory_limit" (bytes the helper
 * may map beyond what it holds, 1 GiB by default). Errors: UNSUPPORTED when the sandbox cannot be
 * had on this machine or the plan holds an op that cannot run there (host
 * functions, collectives, device kernels), naming it, and nothing changes;
 * VALIDATION for bad options or a plan sandboxed already. A plan that
 * svod_plan_load loaded compiled its sources in this process, outside the
 * sandbox (svod_plan_load_with_flags with SVOD_PACKAGE_SANDBOX compiles them
 * confined); packages are compiled already. A kernel that breaks a rule of the sandbox
 * makes svod_plan_execute return SANDBOX_VIOLATION naming the op and the
 * rule; the next execution starts a fresh helper. Thread-safe: calls on one
 * plan are serialized. */
SVOD_C_EXPORT svod_status* svod_plan_sandbox(svod_plan* plan, const char* options_json);

/* ---- Running a plan by name (1.8) --------------------------------------- */

/* A saved plan or a package made from one (docs/PACKAGE_FORMAT.md) names
 * its inputs (buffers of role "input", which the caller fills before a run)
 * and its outputs. Each has a dtype and a shape, row-major; a dimension may
 * be a plan variable (a dynamic batch or sequence length): its size is the
 * variable's value for the next run, and an input's data sets it. Plans
 * without named inputs (plan files that give none) have 0 inputs and run as
 * before. All of these are thread-safe: calls on one plan are serialized. */

/* The number of inputs and of outputs; 0 for a NULL handle. */
SVOD_C_EXPORT size_t svod_plan_input_count(svod_plan* plan);
SVOD_C_EXPORT size_t svod_plan_output_count(svod_plan* plan);
/* Input (output) `index` (0 to count - 1): its name and dtype name ("f32"),
 * both alive as long as the plan, and its rank (number of dimensions).
 * VALIDATION for an index out of range. */
SVOD_C_EXPORT svod_status* svod_plan_input_info(svod_plan* plan, size_t index, const char** name,
                                                const char** dtype, size_t* rank);
SVOD_C_EXPORT svod_status* svod_plan_output_info(svod_plan* plan, size_t index, const char** name,
                                                 const char** dtype, size_t* rank);
/* Dimension `dim` of input (output) `index`: its size for the next run, and
 * the name of the plan variable it is (alive as long as the plan), or NULL
 * for a fixed dimension. VALIDATION for an index or dim out of range. */
SVOD_C_EXPORT svod_status* svod_plan_input_dim(svod_plan* plan, size_t index, size_t dim, int64_t* size,
                                               const char** variable);
SVOD_C_EXPORT svod_status* svod_plan_output_dim(svod_plan* plan, size_t index, size_t dim, int64_t* size,
                                                const char** variable);
/* Copies `bytes` bytes at `data`, an array of `dtype` with `shape` (`rank`
 * sizes, row-major), into input `name`. The dtype must be the input's and
 * the shape its shape, each variable dimension within its variable's
 * bounds; a variable dimension sets its variable for the next runs (the
 * data then fills the input's first elements). The input keeps the data for
 * later runs until it is set again. VALIDATION naming the input for an
 * unknown name, another dtype, rank or fixed size, a variable out of range,
 * or `bytes` other than the shape's; nothing changes then. svod_plan_bind
 * binds an input's buffer instead, at the shape its variables have. */
SVOD_C_EXPORT svod_status* svod_plan_set_input(svod_plan* plan, const char* name, const void* data, size_t bytes,
                                               const char* dtype, const int64_t* shape, size_t rank);
/* Copies output `name` as the last execution left it into `data`: its
 * current shape's elements (svod_plan_output_dim), which must be exactly
 * `bytes` bytes (VALIDATION otherwise, and for an unknown name). An output
 * may also be bound to the caller's buffer (svod_plan_bind), which the
 * plan then writes. svod_plan_execute refuses (VALIDATION) to run while an
 * input was never set or bound, or two inputs give one variable different
 * sizes, naming them. */
SVOD_C_EXPORT svod_status* svod_plan_get_output(svod_plan* plan, const char* name, void* data, size_t bytes);

/* Releases the plan; buffer handles taken from it stay valid. Not
 * concurrently with other calls on this handle. */
SVOD_C_EXPORT svod_status* svod_plan_release(svod_plan* plan);

/* ---- Communicators (1.3) ------------------------------------------------- */

/* A job is N ranks, numbered 0 to N-1, each with its own buffers; a
 * communicator is one rank's end of it. Two transports carry the data: "mpi",
 * one rank per process, started by a launcher (mpirun, srun; the MPI plugin
 * libsvod_comm_mpi is loaded only then), and "local", N ranks as threads of
 * one process.
 *
 * Every call but send and recv is collective: all ranks make the same calls
 * in the same order, with the same dtype, element count, op and root. The
 * ranks compare these as part of the call, so a mismatch between ranks, or
 * an argument one rank gets wrong (a NULL buffer, an op that is no
 * svod_reduce_op, a root out of range), is a VALIDATION status on every rank
 * instead of a hang; nothing moves and the communicator stays usable. A rank
 * that fails (svod_comm_abort, a failed svod_plan_execute) makes the
 * others' current and next calls fail (EXECUTION) naming it; a rank that
 * never arrives makes them fail with TIMEOUT naming it after
 * SVOD_COMM_TIMEOUT seconds (default 60, read when the communicator is
 * made). After such a failure the communicator is broken: every later call
 * on it fails.
 *
 * Reductions are deterministic: element i is combined in rank order, x0 op
 * x1 op ... op x(N-1), by one rank and copied to the others, so every rank
 * gets the same bits, in every run and on either transport. f16 and bf16 are
 * combined in f32 and rounded once; integers wrap on overflow; bool sum and
 * max are "or", prod and min "and"; a NaN in a float min or max wins.
 *
 * Buffers are svod_buffer handles of any kind: allocated, wrapped host
 * memory (svod_buffer_wrap_host: the call reads and writes the caller's
 * array), views, a plan's (svod_plan_buffer). Buffers on a device (OpenCL,
 * CUDA) are staged through host memory. With mpi one call moves at most
 * 2 GiB to one peer (more is UNSUPPORTED).
 *
 * Threads. Each rank calls from its own thread: a local group's ranks are
 * meant for as many threads, and one thread calling a collective on two
 * ranks of a group waits for itself until the timeout. Calls on one handle
 * from several threads run one at a time, in an order that must still match
 * across ranks. svod_comm_rank, svod_comm_size and svod_comm_transport are
 * thread-safe. */

typedef struct svod_comm svod_comm;

/* How all_reduce and reduce_scatter combine elements. Other values are
 * VALIDATION errors (on every rank, as above). */
typedef enum svod_reduce_op {
  SVOD_REDUCE_SUM = 0,
  SVOD_REDUCE_PROD = 1,
  SVOD_REDUCE_MIN = 2,
  SVOD_REDUCE_MAX = 3
} svod_reduce_op;

/* This process's rank of its world: `transport` "mpi" (the job an MPI
 * launcher started; MPI starts at the first call and ends at exit), "local"
 * (a job of this process alone: rank 0 of 1), or "auto" ("mpi" when the
 * process was started by an MPI launcher, else "local"). The world
 * communicator is made once per process and lives until it exits; every call
 * returns a new handle to it, and releasing a handle leaves it alone.
 * Errors: VALIDATION for another transport name, or one that differs from the
 * world's ("local" after "mpi"); DEVICE_UNAVAILABLE when the MPI plugin is
 * missing or MPI fails to start. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_comm_world(const char* transport, svod_comm** out);
/* A new local group of `ranks` ranks (1 to 1024), for as many threads of
 * this process: out[i] (an array of `ranks` handles, all written on success)
 * is rank i. Each handle is released by the caller, once its rank has made
 * its last call (a rank released early never arrives: its peers time out);
 * a plan loaded on a rank keeps it alive. VALIDATION for a count out of
 * range or a bad SVOD_COMM_TIMEOUT. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_comm_create_local(int ranks, svod_comm** out);
/* This handle's rank, the job's number of ranks, and (1.7) the transport
 * ("mpi", "local", alive as long as the handle); -1, 0 and NULL for a NULL
 * handle. svod_comm_backend is svod_comm_transport's name before 1.7, kept
 * for the programs that call it. */
SVOD_C_EXPORT int svod_comm_rank(const svod_comm* comm);
SVOD_C_EXPORT int svod_comm_size(const svod_comm* comm);
SVOD_C_EXPORT const char* svod_comm_transport(const svod_comm* comm);
SVOD_C_EXPORT const char* svod_comm_backend(const svod_comm* comm);
/* (1.4) This handle's index among the ranks on its own machine (0 to
 * svod_comm_local_size() - 1) and how many ranks that machine has: with
 * "mpi", the ranks that share memory with this one, found by MPI at start
 * whatever the launcher; with "local", the rank and the number of ranks.
 * A plan loaded with `comm` whose device is "CUDA:local" or "CL:local" runs
 * on device svod_comm_local_rank() % the number of such devices. -1 and 0
 * for a NULL handle. Thread-safe. */
SVOD_C_EXPORT int svod_comm_local_rank(const svod_comm* comm);
SVOD_C_EXPORT int svod_comm_local_size(const svod_comm* comm);
/* Returns once every rank has called it. */
SVOD_C_EXPORT svod_status* svod_comm_barrier(svod_comm* comm);
/* In place: every rank's `buffer` becomes the elementwise combination (`op`)
 * of every rank's `buffer`. */
SVOD_C_EXPORT svod_status* svod_comm_all_reduce(svod_comm* comm, svod_buffer* buffer, svod_reduce_op op);
/* `dst` (svod_comm_size() times the elements of `src`, same dtype, not
 * overlapping it) gets rank k's `src` at element k * svod_buffer_count(src),
 * on every rank. */
SVOD_C_EXPORT svod_status* svod_comm_all_gather(svod_comm* comm, const svod_buffer* src, svod_buffer* dst);
/* `src` holds svod_comm_size() parts of the elements of `dst` (same dtype,
 * not overlapping): rank k's `dst` becomes the combination (`op`) of every
 * rank's k-th part. */
SVOD_C_EXPORT svod_status* svod_comm_reduce_scatter(svod_comm* comm, const svod_buffer* src, svod_buffer* dst,
                                                    svod_reduce_op op);
/* Every rank's `buffer` becomes rank `root`'s. */
SVOD_C_EXPORT svod_status* svod_comm_broadcast(svod_comm* comm, svod_buffer* buffer, int root);
/* Point to point, not collective: svod_comm_send returns once rank `dest`
 * has the message (mpi: once it is handed over), svod_comm_recv once the
 * message from rank `source` is in `buffer`. The two buffers' dtype and
 * count and the `tag` (0 to 32767) must match: a mismatch fails the
 * receiver, and with local ranks the sender too. A peer that is not another
 * rank, a bad tag or a NULL buffer fail this rank alone (VALIDATION). */
SVOD_C_EXPORT svod_status* svod_comm_send(svod_comm* comm, const svod_buffer* buffer, int dest, int tag);
SVOD_C_EXPORT svod_status* svod_comm_recv(svod_comm* comm, svod_buffer* buffer, int source, int tag);
/* Declares this rank failed, for `reason`: the other ranks' current and
 * next calls fail naming this rank and the reason (with mpi, a recv waiting
 * for this rank times out instead). The communicator is broken after, on
 * every rank; aborting again does nothing. It waits for a call of this rank
 * in flight on another thread. */
SVOD_C_EXPORT svod_status* svod_comm_abort(svod_comm* comm, const char* reason);
/* Releases the handle. A local rank lives on while a plan loaded on it
 * does; the world communicator lives until the process exits. Not concurrently with
 * other calls on this handle. */
SVOD_C_EXPORT svod_status* svod_comm_release(svod_comm* comm);

/* svod_plan_load, svod_plan_load_package and svod_plan_load_package_file for
 * one rank of a job (the plain loaders run a plan as rank 0 of 1): every
 * rank loads the same plan on its own rank of one communicator. The plan's
 * read-only variables rank and world_size are svod_comm_rank(comm) and
 * svod_comm_size(comm), its collective ops run on `comm`, which the plan
 * keeps alive, and a device named "CUDA:local" or "CL:local" is this rank's
 * of its machine (svod_comm_local_rank). The load is collective: the ranks check that they all load
 * the same plan with the same variable values, and fail with VALIDATION on
 * every rank naming the ranks that differ. A load that fails on one rank of
 * several aborts `comm` (svod_comm_abort), so that the others fail at once
 * naming it instead of waiting for it (in their load, or in their first
 * execution when the ranks had already compared their plans); make a new
 * group, or end the job, after a failed load. Executions of the plan are
 * collective too, and a failed one aborts `comm` likewise. Errors as the
 * plain loaders, and VALIDATION for a NULL `comm`. Thread-safe. */
SVOD_C_EXPORT svod_status* svod_plan_load_with_comm(const char* path, const char* vars_json, svod_comm* comm,
                                                    svod_plan** out);
SVOD_C_EXPORT svod_status* svod_plan_load_package_with_comm(const void* data, size_t size, const char* vars_json,
                                                            svod_comm* comm, svod_plan** out);
SVOD_C_EXPORT svod_status* svod_plan_load_package_file_with_comm(const char* path, const char* vars_json,
                                                                 svod_comm* comm, svod_plan** out);

/* ---- Log lines (1.6) ------------------------------------------------------ */

/* svod logs warnings (always) and debug lines (with SVOD_DEBUG set: 1
 * compiles and cache hits, 2 every launch, 3 sources, 4 disassembly), each
 * one line "svod: ..." on stderr by default. */

/* The level of a line; the values are Python logging's. Other levels may be
 * added in minor versions: treat an unknown one as SVOD_LOG_WARNING. */
typedef enum svod_log_level {
  SVOD_LOG_DEBUG = 10,
  SVOD_LOG_WARNING = 30
} svod_log_level;

/* Receives a line: its level (an svod_log_level) and its text, without the
 * "svod: " prefix and the trailing newline (a message may hold newlines
 * inside: sources, compiler logs), alive during the call only. */
typedef void (*svod_log_callback)(void* user, int level, const char* line);

/* Sends every later log line of the process to `callback` (with `user`)
 * instead of stderr; NULL puts stderr back (`user` is then ignored).
 * Lines come from any thread — the caller's, the thread pool's, compile and
 * communication threads — and several threads may be in the callback at
 * once: it must be thread-safe. svod may hold its own locks while calling
 * it, so it must not call svod functions (but svod_set_log_callback and the
 * status functions), nor wait for a thread that may be inside svod. A line logged on a thread that is already in the
 * callback (the callback, or something it calls, logs through svod) is
 * written to stderr instead, so the callback is never re-entered on one
 * thread. Reports written as svod ends the process or from a signal
 * handler (a kernel fault it could not stop, SVOD_OP_TIMEOUT) always go to
 * stderr. Called outside the callback, the function returns once no thread
 * is still in a call of the callback it replaced, so its `user` data may be
 * freed after; called from inside the callback it returns at once. Errors:
 * INTERNAL when memory runs out (the previous callback stays). Thread-safe. */
SVOD_C_EXPORT svod_status* svod_set_log_callback(svod_log_callback callback, void* user);

#ifdef __cplusplus
}
#endif

#endif /* SVOD_SVOD_H */
