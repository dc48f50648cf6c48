// Compiled with -fsyntax-only by ctest (tests/CMakeLists.txt), never linked:
// a visit of a plan op (svod/base/visit.h) that handles every alternative
// compiles; one that leaves an alternative out (SVOD_LEAVE_OUT_VIEW) or
// handles it with a generic lambda (SVOD_CATCH_ALL) must not, which is how
// a new kind of op fails to compile wherever ops are visited.
#include "svod/base/visit.h"
#include "svod/plan/execution_plan.h"

namespace svod {

size_t buffers_named(const PlanOp& op) {
  return visit_exhaustively(
      op, [](const KernelOp& k) { return k.buffers.size(); }, [](const CopyOp&) { return size_t{2}; },
      [](const CustomOp& f) { return f.buffers.size(); },
      [](const CollectiveOp& c) { return c.buffers.empty() ? size_t{2} : c.buffers.size(); }
#if defined(SVOD_CATCH_ALL)
      ,
      [](const auto&) { return size_t{2}; }
#elif !defined(SVOD_LEAVE_OUT_VIEW)
      ,
      [](const ViewOp&) { return size_t{2}; }
#endif
  );
}

}  // namespace svod
