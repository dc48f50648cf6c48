# trampoline_check.cpp built for AArch64 with svod/backends/cpu/trap_aarch64.cpp
# and run under qemu-aarch64: the AArch64 trampoline checked on any machine
# with Debian's g++-aarch64-linux-gnu and qemu-user. Without them it prints
# "skipped: ..." (a skipped test). -DSOURCE_DIR=... -DBINARY_DIR=...
find_program(CROSS_CXX aarch64-linux-gnu-g++)
find_program(QEMU qemu-aarch64)
if(NOT CROSS_CXX OR NOT QEMU)
  message("skipped: needs aarch64-linux-gnu-g++ and qemu-aarch64 (Debian: g++-aarch64-linux-gnu, qemu-user)")
  return()
endif()
set(program ${BINARY_DIR}/trampoline_check_aarch64)
execute_process(
  COMMAND ${CROSS_CXX} -std=c++20 -O2 -Wall -Wextra -Werror -I${SOURCE_DIR}
    ${SOURCE_DIR}/tests/cpu/trampoline/trampoline_check.cpp ${SOURCE_DIR}/svod/backends/cpu/trap_aarch64.cpp
    -o ${program}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the AArch64 build of trampoline_check.cpp failed")
endif()
execute_process(COMMAND ${QEMU} -L /usr/aarch64-linux-gnu ${program} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "trampoline_check on AArch64 (qemu-aarch64) failed: ${status}")
endif()
