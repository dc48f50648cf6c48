# Installs the svod build tree into SCRATCH_DIR/prefix, then builds a program
# against that installation and runs it (with the arguments RUN_ARGS):
#  - by default the CMake project CONSUMER_SOURCE_DIR, through
#    find_package(svod CONFIG); its program is CONSUMER_EXECUTABLE
#    ("consumer" when not given);
#  - with PKG_CONFIG_SOURCE, that one C file compiled by C_COMPILER with
#    C_FLAGS and what `pkg-config --cflags --libs svod` says, as a Makefile
#    would; the program then finds the libraries through LD_LIBRARY_PATH;
#  - with PKG_CONFIG_SOURCE and UNINSTALLED, the same against the build tree
#    itself, nothing installed: `pkg-config svod-uninstalled` with
#    PKG_CONFIG_PATH=SVOD_BINARY_DIR, and the program finds the library
#    through the run path that file gives (LD_LIBRARY_PATH unset).
file(REMOVE_RECURSE ${SCRATCH_DIR})
file(MAKE_DIRECTORY ${SCRATCH_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
if(UNINSTALLED)
  set(pc_dir ${SVOD_BINARY_DIR})
  set(pc_package svod-uninstalled)
  # Only the uninstalled file is there: an svod.pc in the build root would
  # give C users of the build the paths of an installation.
  if(EXISTS ${SVOD_BINARY_DIR}/svod.pc)
    message(FATAL_ERROR "${SVOD_BINARY_DIR}/svod.pc exists: the build root has svod-uninstalled.pc only")
  endif()
else()
  run(${CMAKE_COMMAND} --install ${SVOD_BINARY_DIR} --prefix ${SCRATCH_DIR}/prefix)
  set(pc_dir ${SCRATCH_DIR}/prefix/lib/pkgconfig)
  set(pc_package svod)
endif()
if(PKG_CONFIG_SOURCE)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  unset(ENV{PKG_CONFIG_LIBDIR})
  execute_process(COMMAND pkg-config --cflags --libs ${pc_package} OUTPUT_VARIABLE flags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config does not find ${pc_package} in ${pc_dir}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${C_FLAGS} ${flags}")
  set(program ${SCRATCH_DIR}/pkg_config_consumer)
  run(${C_COMPILER} ${PKG_CONFIG_SOURCE} ${flags} -lm -o ${program})
  if(UNINSTALLED)
    unset(ENV{LD_LIBRARY_PATH})
  else()
    set(ENV{LD_LIBRARY_PATH} ${SCRATCH_DIR}/prefix/lib)
  endif()
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
