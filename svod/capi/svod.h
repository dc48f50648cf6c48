/* svod's C API: compile and launch kernels, move data and run plan files from
 * C or from any language with a C FFI (Rust, Go, Julia, Python's ctypes).
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
 * Handles. svod_device, svod_buffer, svod_program and svod_plan are opaque
 * and single-owner: each function that returns one (through an out-parameter)
 * gives the caller a handle to release exactly once with its release
 * function. What a handle refers to is shared and reference-counted inside
 * svod, so releasing a handle never invalidates others: a program keeps its
 * device alive, a plan keeps its buffers alive, and a buffer handle taken
 * from a plan stays valid after the plan is released. A release of a handle
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
#define SVOD_API_VERSION_MINOR 2
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
  SVOD_ERROR_INTERNAL = 11            /* a bug in svod, or out of memory */
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
 * and compiling is off. Added in API version 1.1.
 * Thread-safe, also on the same bytes. */
SVOD_C_EXPORT svod_status* svod_plan_load_package(const void* data, size_t size, const char* vars_json,
                                                  svod_plan** out);
/* As svod_plan_load_package, from a package file: the file is mapped and
 * buffers use their initial data where it lies, copy-on-write (the file never
 * changes). IO when the file cannot be read. Added in API version 1.1.
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
 * device; views of it follow). The plan keeps the buffer alive. Thread-safe:
 * calls on one plan are serialized. */
SVOD_C_EXPORT svod_status* svod_plan_bind(svod_plan* plan, const char* name, svod_buffer* buffer);
/* Runs every operation of the plan once, with independent operations in
 * parallel (a plan spanning devices puts each on its device's queue). A
 * failure while running returns its kind (EXECUTION, ...) and leaves the
 * plan poisoned: later executions return PLAN_POISONED until it is loaded
 * again, on every device. Thread-safe: calls on one plan are serialized. */
SVOD_C_EXPORT svod_status* svod_plan_execute(svod_plan* plan);
/* Releases the plan; buffer handles taken from it stay valid. Not
 * concurrently with other calls on this handle. */
SVOD_C_EXPORT svod_status* svod_plan_release(svod_plan* plan);

#ifdef __cplusplus
}
#endif

#endif /* SVOD_SVOD_H */
