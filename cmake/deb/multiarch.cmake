# Run by cpack (CPACK_PRE_BUILD_SCRIPTS, cmake/SvodPackaging.cmake) on the staging tree of the
# Debian package, after the install rules have run into it with the prefix /usr and before it is
# packed: moves what they put into /usr/${CPACK_SVOD_CONFIGURED_LIBDIR} (the build tree's library
# folder, lib for its prefix /usr/local) into Debian's multiarch folder
# /usr/${CPACK_SVOD_DEB_LIBDIR} (lib/x86_64-linux-gnu), where GNUInstallDirs would have put it for
# the prefix /usr:
#  - libsvod_runtime, libsvod_c and their links, the plugins (libsvod_llvm, libsvod_comm_mpi), and
#    the sandbox's helper (svod-sandbox-helper), which svod finds beside libsvod_runtime;
#  - cmake/svod: svodTargets*.cmake and svodConfig.cmake find the prefix by going up from their
#    own folder, one step more now, and name the libraries' folder;
#  - pkgconfig/svod.pc: prefix (relative to ${pcfiledir}) and libdir likewise.
# The Python package (lib/python3/dist-packages) stays. Then the RPATHs made only of $ORIGIN
# paths (the command's $ORIGIN/../lib, libsvod_c's $ORIGIN, the extension's
# $ORIGIN;$ORIGIN/../../..) are dropped: in the package everything finds libsvod_runtime through
# the standard search path, as Debian policy wants of a library in a system folder.
cmake_minimum_required(VERSION 3.25)

set(root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
if(CPACK_SET_DESTDIR)
  string(APPEND root "${CPACK_PACKAGING_INSTALL_PREFIX}")  # DESTDIR + prefix
endif()
if(NOT IS_DIRECTORY "${root}/bin")
  message(FATAL_ERROR "svod multiarch.cmake: no ${root}/bin: not cpack's staging tree of the prefix")
endif()
set(from_dir "${CPACK_SVOD_CONFIGURED_LIBDIR}")
set(to_dir "${CPACK_SVOD_DEB_LIBDIR}")
if(IS_ABSOLUTE "${from_dir}")
  message(FATAL_ERROR "svod multiarch.cmake: CMAKE_INSTALL_LIBDIR=${from_dir} is absolute: configure with a relative one")
endif()
set(from "${root}/${from_dir}")
set(to "${root}/${to_dir}")

function(replace_in file regex replacement)
  file(READ "${file}" text)
  string(REGEX REPLACE "${regex}" "${replacement}" fixed "${text}")
  if(fixed STREQUAL text)
    message(FATAL_ERROR "svod multiarch.cmake: ${file} has no ${regex}")
  endif()
  file(WRITE "${file}" "${fixed}")
endfunction()

if(NOT from_dir STREQUAL to_dir)
  file(MAKE_DIRECTORY "${to}")
  # The libraries and their links (moved as links) and the sandbox's helper, not the folders
  # beside them (python3).
  file(GLOB libraries LIST_DIRECTORIES false "${from}/libsvod_*" "${from}/svod-sandbox-helper")
  foreach(library IN LISTS libraries)
    get_filename_component(name "${library}" NAME)
    file(RENAME "${library}" "${to}/${name}")
  endforeach()
  # How many folders deeper the new libdir is than the old (lib -> lib/x86_64-linux-gnu: 1).
  string(REGEX MATCHALL "[^/]+" from_parts "${from_dir}")
  string(REGEX MATCHALL "[^/]+" to_parts "${to_dir}")
  list(LENGTH from_parts from_depth)
  list(LENGTH to_parts to_depth)
  math(EXPR deeper "${to_depth} - ${from_depth}")
  if(deeper LESS 0)
    message(FATAL_ERROR "svod multiarch.cmake: ${to_dir} is not below ${from_dir}'s depth")
  endif()

  if(IS_DIRECTORY "${from}/cmake/svod")
    file(MAKE_DIRECTORY "${to}/cmake")
    file(RENAME "${from}/cmake/svod" "${to}/cmake/svod")
    set(up "")
    foreach(i RANGE ${deeper})
      if(i GREATER 0)
        string(APPEND up "get_filename_component(_IMPORT_PREFIX \"\${_IMPORT_PREFIX}\" PATH)\n")
      endif()
    endforeach()
    # svodTargets.cmake: one get_filename_component(... PATH) per folder of its destination.
    replace_in("${to}/cmake/svod/svodTargets.cmake"
               "(get_filename_component\\(_IMPORT_PREFIX \"\\\${CMAKE_CURRENT_LIST_FILE}\" PATH\\)\n)"
               "\\1${up}")
    file(GLOB per_config "${to}/cmake/svod/svodTargets-*.cmake")
    foreach(file IN LISTS per_config)
      replace_in("${file}" "\\\${_IMPORT_PREFIX}/${from_dir}/" "\${_IMPORT_PREFIX}/${to_dir}/")
    endforeach()
    # svodConfig.cmake (@PACKAGE_INIT@): PACKAGE_PREFIX_DIR, "${CMAKE_CURRENT_LIST_DIR}/../../../".
    file(RELATIVE_PATH back "${to}/cmake/svod" "${root}")
    string(REGEX REPLACE "/$" "" back "${back}")
    replace_in("${to}/cmake/svod/svodConfig.cmake"
               "\\\${CMAKE_CURRENT_LIST_DIR}/(\\.\\./)+" "\${CMAKE_CURRENT_LIST_DIR}/${back}/")
  endif()

  if(EXISTS "${from}/pkgconfig/svod.pc")
    file(MAKE_DIRECTORY "${to}/pkgconfig")
    file(RENAME "${from}/pkgconfig/svod.pc" "${to}/pkgconfig/svod.pc")
    file(RELATIVE_PATH back "${to}/pkgconfig" "${root}")
    string(REGEX REPLACE "/$" "" back "${back}")
    replace_in("${to}/pkgconfig/svod.pc" "(^|\n)prefix=[^\n]*" "\\1prefix=\${pcfiledir}/${back}")
    replace_in("${to}/pkgconfig/svod.pc" "(^|\n)libdir=[^\n]*" "\\1libdir=\${prefix}/${to_dir}")
  endif()

  # Folders left empty (lib/cmake, lib/pkgconfig) go.
  foreach(dir "${from}/cmake" "${from}/pkgconfig" "${from}")
    file(GLOB left "${dir}/*")
    if(IS_DIRECTORY "${dir}" AND NOT left)
      file(REMOVE_RECURSE "${dir}")
    endif()
  endforeach()
endif()

# The RPATHs made only of $ORIGIN paths go.
file(GLOB_RECURSE candidates LIST_DIRECTORIES false "${root}/bin/*" "${root}/lib/*.so" "${root}/lib/*.so.*")
foreach(file IN LISTS candidates)
  if(IS_SYMLINK "${file}")
    continue()
  endif()
  file(READ_ELF "${file}" RPATH rpath RUNPATH runpath CAPTURE_ERROR not_elf)
  if(not_elf)
    continue()
  endif()
  set(paths "${rpath}:${runpath}")
  string(REGEX REPLACE "(^|:)\\$ORIGIN[^:]*" "" others "${paths}")
  string(REPLACE ":" "" others "${others}")
  if(NOT others STREQUAL "" OR paths STREQUAL ":")
    continue()
  endif()
  file(RPATH_REMOVE FILE "${file}")
endforeach()
