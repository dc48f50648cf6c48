// Custom functions: named host routines that plans call like kernels.
//
// Some operations are not worth compiling (an all-reduce across shards, a
// fill, a debug print) or cannot be expressed as a kernel at all. A custom
// function is registered once under a name with a validator; a plan resolves
// the name when it is built, asks the validator to check the buffers and
// attributes and to say which buffers are read and which written (that is what
// the plan's hazard analysis orders by), and later calls the routine with the
// buffers, the attributes and the plan's current variable values.
//
// Built in: "all_reduce" (attr op = "sum" | "max" | "min"), "fill" (attr
// value) and "print" (writes the buffers to stdout, for debugging; optional
// attr label).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "svod/device/buffer.h"
#include "svod/program/program_spec.h"

namespace svod {

using AttrValue = std::variant<int64_t, double, std::string>;
using Attrs = std::map<std::string, AttrValue, std::less<>>;

// "42", "0.5", "\"text\"" — for error messages and print.
std::string to_string(const AttrValue& value);

// A read-only view of variable values by name: `names` sorted ascending,
// values[i] belongs to names[i]. Plans hand out views of their own tables, so
// no map is built per call.
struct VariableValues {
  std::span<const std::string> names;
  std::span<const int64_t> values;

  std::optional<int64_t> find(std::string_view name) const noexcept;
};

// Checks `buffers` and `attrs` for one call and returns the access of each
// buffer (same length as `buffers`). Throws Error(Validation) naming the
// function and what is wrong.
using CustomValidateFn = std::function<std::vector<Access>(std::span<const Buffer> buffers, const Attrs& attrs)>;
// Does the work. Arguments were accepted by the validator at build time, and
// rebinding keeps sizes and dtypes, so it may rely on what was validated.
using CustomRunFn =
    std::function<void(std::span<const Buffer> buffers, const Attrs& attrs, const VariableValues& vars)>;

struct CustomFunctionDef {
  CustomRunFn run;
  CustomValidateFn validate;
};

// Registers `name`; throws Error(Validation) when the name is taken or a
// callback is missing. Thread-safe.
void register_custom_function(std::string name, CustomFunctionDef def);
// Removes a registration (plans built before keep their resolved function).
// Returns false when the name was not registered.
bool unregister_custom_function(std::string_view name);
// The registered function, or Error(Validation) listing the known names.
std::shared_ptr<const CustomFunctionDef> find_custom_function(std::string_view name);

// Looks `name` up, validates, and runs it now on the calling thread.
void run_custom_function(std::string_view name, std::span<const Buffer> buffers, const Attrs& attrs,
                         const VariableValues& vars = {});

// Helpers for validators: reject attributes outside `allowed`, and read one
// attribute of the expected type (Error(Validation) naming function and attr
// when missing or of another type).
void check_attr_names(std::string_view function, const Attrs& attrs, std::initializer_list<std::string_view> allowed);
const std::string& attr_string(std::string_view function, const Attrs& attrs, std::string_view name);
int64_t attr_int(std::string_view function, const Attrs& attrs, std::string_view name);
// Accepts an integer or a floating-point attribute.
double attr_number(std::string_view function, const Attrs& attrs, std::string_view name);

}  // namespace svod
