# cmake -DLAUNCHER=<svod_launcher_bare> -DOUT=<header> -P launcher_text.cmake: runs the launcher
# that always opens libsvod_command.so for `--help` and `--version` and writes what they print
# into OUT as two byte arrays, svod_help_text and svod_version_text, which `svod` prints itself.
cmake_minimum_required(VERSION 3.25)

set(header "// Made by tools/svod/launcher_text.cmake from `svod_launcher_bare --help` and `--version`.\n")
foreach(answer help version)
  set(file "${OUT}.${answer}.txt")
  execute_process(COMMAND "${LAUNCHER}" --${answer} OUTPUT_FILE "${file}" RESULT_VARIABLE status)
  if(NOT status STREQUAL "0")
    message(FATAL_ERROR "svod: `${LAUNCHER} --${answer}` failed (${status})")
  endif()
  file(READ "${file}" bytes HEX)
  file(REMOVE "${file}")
  if(bytes STREQUAL "")
    message(FATAL_ERROR "svod: `${LAUNCHER} --${answer}` printed nothing")
  endif()
  string(REGEX REPLACE "(..)" "0x\\1," bytes "${bytes}")
  string(APPEND header "static const unsigned char svod_${answer}_text[] = {${bytes}};\n")
endforeach()
file(WRITE "${OUT}" "${header}")
