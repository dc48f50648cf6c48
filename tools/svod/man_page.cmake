# cmake -DLAUNCHER=<svod_launcher_bare> -DVERSION=<version> -DOUT=<svod.1> -P man_page.cmake: writes
# svod's manual page from what `svod help` and `svod help COMMAND ...` print, so that the page
# says what the command does, never an older copy of it.
cmake_minimum_required(VERSION 3.25)

# The help of `svod WORDS` (a list), run as the build runs the launcher for its own answers.
function(help_of words out)
  execute_process(COMMAND "${LAUNCHER}" help ${words} OUTPUT_VARIABLE text RESULT_VARIABLE status)
  if(NOT status STREQUAL "0")
    message(FATAL_ERROR "svod: `${LAUNCHER} help ${words}` failed (${status})")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# The commands a help text lists under "Subcommands:".
function(commands_in text out)
  set(commands "")
  string(FIND "${text}" "\nSubcommands:\n" at)
  if(NOT at EQUAL -1)
    string(SUBSTRING "${text}" ${at} -1 rest)
    string(REGEX MATCHALL "\n  [a-z][a-z-]*" names "${rest}")
    foreach(name IN LISTS names)
      string(STRIP "${name}" name)
      list(APPEND commands "${name}")
    endforeach()
  endif()
  set(${out} "${commands}" PARENT_SCOPE)
endfunction()

# Help text as roff lines shown as they are: backslashes escaped, no line read as a request.
function(verbatim text out)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} ".nf\n${text}.fi\n" PARENT_SCOPE)
endfunction()

help_of("" top)
verbatim("${top}" top_roff)
set(page ".\\\" Made by tools/svod/man_page.cmake from `svod help` and `svod help COMMAND`.
.TH SVOD 1 \"\" \"svod ${VERSION}\" \"User Commands\"
.SH NAME
svod \\- compile, load, run and time ML kernels
.SH SYNOPSIS
.B svod
.I COMMAND
.RI [ OPTIONS ]
.SH DESCRIPTION
${top_roff}.SH COMMANDS
")
commands_in("${top}" commands)
foreach(command IN LISTS commands)
  help_of("${command}" help)
  verbatim("${help}" roff)
  string(APPEND page ".SS svod ${command}\n${roff}")
  commands_in("${help}" inner)
  foreach(sub IN LISTS inner)
    help_of("${command};${sub}" help)
    verbatim("${help}" roff)
    string(APPEND page ".SS svod ${command} ${sub}\n${roff}")
  endforeach()
endforeach()
string(APPEND page ".SH FILES
The plan, package and tune file formats, the security model and the benchmarks are described
in the documents installed with svod (/usr/share/doc/svod on a Debian system):
PLAN_FORMAT.md, PACKAGE_FORMAT.md, TUNE_FORMAT.md, SECURITY.md, SCALING.md, ARCHITECTURE.md.
")
file(WRITE "${OUT}" "${page}")
