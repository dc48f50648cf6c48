#include "svod/base/rethrow.h"

#include <fmt/format.h>

#include "svod/base/error.h"

namespace svod {

void rethrow_with_context(std::exception_ptr error, std::string_view where) {
  try {
    std::rethrow_exception(error);
  } catch (const KernelFault& e) {
    throw KernelFault(e.info(), fmt::format("{}: {}", where, e.what()));
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", where, e.what()));
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Execution, fmt::format("{}: {}", where, e.what()));
  } catch (...) {
    throw Error(ErrorKind::Execution, fmt::format("{}: unknown exception", where));
  }
}

}  // namespace svod
