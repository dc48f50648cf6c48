# Compares the functions LIBRARY exports (nm -D --defined-only) with the list
# in EXPECTED, one name per line; any difference fails with both sides shown.
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY} OUTPUT_VARIABLE nm_output RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}")
endif()
string(REGEX MATCHALL "[^\n]+" nm_lines "${nm_output}")
set(exported "")
foreach(line IN LISTS nm_lines)
  # "0000000000012340 T svod_api_version"
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] " "" name "${line}")
  list(APPEND exported "${name}")
endforeach()
list(SORT exported)

file(STRINGS ${EXPECTED} expected REGEX "^[^#]")
list(SORT expected)

if(NOT exported STREQUAL expected)
  set(added ${exported})
  list(REMOVE_ITEM added ${expected})
  set(missing ${expected})
  list(REMOVE_ITEM missing ${exported})
  list(JOIN added "\n  " added)
  list(JOIN missing "\n  " missing)
  message(FATAL_ERROR "the exports of ${LIBRARY} differ from ${EXPECTED}\n"
          "exported but not listed:\n  ${added}\nlisted but not exported:\n  ${missing}\n"
          "An intended ABI change updates the list in the same commit (and adds, never changes or removes, "
          "within a major version).")
endif()
list(LENGTH exported count)
message(STATUS "${count} exports match ${EXPECTED}")
