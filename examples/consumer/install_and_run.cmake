# Installs the svod build tree into SCRATCH_DIR/prefix, then builds a program
# against that installation and runs it (with the arguments RUN_ARGS):
#  - by default the CMake project CONSUMER_SOURCE_DIR, through
#    find_package(svod CONFIG); its program is CONSUMER_EXECUTABLE
#    ("consumer" when not given);
#  - with PKG_CONFIG_SOURCE, that one C file compiled by C_COMPILER with
#    C_FLAGS and what `pkg-config --cflags --libs svod` says, as a Makefile
#    would; the program then finds the libraries through LD_LIBRARY_PATH.
file(REMOVE_RECURSE ${SCRATCH_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${SVOD_BINARY_DIR} --prefix ${SCRATCH_DIR}/prefix)
if(PKG_CONFIG_SOURCE)
  set(ENV{PKG_CONFIG_PATH} ${SCRATCH_DIR}/prefix/lib/pkgconfig)
  execute_process(COMMAND pkg-config --cflags --libs svod OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config does not find svod in ${SCRATCH_DIR}/prefix/lib/pkgconfig")
  endif()
  separate_arguments(flags UNIX_COMMAND "${C_FLAGS} ${flags}")
  set(program ${SCRATCH_DIR}/pkg_config_consumer)
  run(${C_COMPILER} ${PKG_CONFIG_SOURCE} ${flags} -lm -o ${program})
  set(ENV{LD_LIBRARY_PATH} ${SCRATCH_DIR}/prefix/lib)
else()
  if(NOT CONSUMER_EXECUTABLE)
    set(CONSUMER_EXECUTABLE consumer)
  endif()
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${SCRATCH_DIR}/build -G ${CMAKE_GENERATOR}
      -DCMAKE_PREFIX_PATH=${SCRATCH_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
  run(${CMAKE_COMMAND} --build ${SCRATCH_DIR}/build)
  set(program ${SCRATCH_DIR}/build/${CONSUMER_EXECUTABLE})
endif()
run(${program} ${RUN_ARGS})
