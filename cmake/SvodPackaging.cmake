# Installing svod like any library: the installed `svod` command finds the
# libraries, setup.py builds a wheel of the Python package from the component
# svod_wheel, and `cpack -G DEB` makes a Debian package of the whole
# installation (README.md, "Install"; scripts/test-install.sh tries all three).
include(GNUInstallDirs)

# <prefix>/bin/svod finds libsvod_command in <prefix>/<libdir> wherever the
# prefix is, and the command libsvod_runtime beside itself (the plugins are
# found beside the runtime, by the runtime).
set_target_properties(svod_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
set_target_properties(svod_command PROPERTIES INSTALL_RPATH "$ORIGIN")

# The wheel's compiled part, installed only when asked for by name
# (`cmake --install BUILD --component svod_wheel --prefix DIR`, as setup.py
# does): DIR/svod/ gets the extension, libsvod_runtime and the plugins side by
# side, so the extension finds the runtime through its RPATH ($ORIGIN) and the
# runtime its plugins beside itself. setup.py adds the Python files and turns
# the library's version symlink into the file (a wheel holds no links).
# `cmake --build BUILD --target svod_python_wheel` builds what it needs.
if(TARGET svod_python)
  set(svod_wheel_targets svod_python svod_runtime svod_command)
  foreach(plugin svod_llvm svod_comm_mpi)
    if(TARGET ${plugin})
      list(APPEND svod_wheel_targets ${plugin})
    endif()
  endforeach()
  install(TARGETS ${svod_wheel_targets} LIBRARY DESTINATION svod NAMELINK_SKIP
          COMPONENT svod_wheel EXCLUDE_FROM_ALL)
  # The svod command's launcher goes beside them as DIR/svod/svod, with the
  # RPATH $ORIGIN instead of the prefix layout's $ORIGIN/../lib (INSTALL_RPATH
  # is one per target), so it opens libsvod_command there: the package's
  # console script `svod` (python/_svod_cli.py) execs it, and the runtime the
  # command loads finds the plugins beside itself as it does for the extension.
  install(TARGETS svod_cli RUNTIME DESTINATION svod COMPONENT svod_wheel EXCLUDE_FROM_ALL)
  # The sandbox's helper beside the runtime, where the runtime looks for it.
  if(TARGET svod_sandbox_helper)
    install(TARGETS svod_sandbox_helper RUNTIME DESTINATION svod COMPONENT svod_wheel EXCLUDE_FROM_ALL)
    list(APPEND svod_wheel_targets svod_sandbox_helper)
  endif()
  install(CODE "file(RPATH_SET FILE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/svod/svod\" NEW_RPATH \"$ORIGIN\")"
          COMPONENT svod_wheel EXCLUDE_FROM_ALL)
  add_custom_target(svod_python_wheel)
  add_dependencies(svod_python_wheel ${svod_wheel_targets} svod_cli)
endif()

# The licence, the README and the documents the command's help points at,
# in <prefix>/share/doc/svod (the manual page: tools/svod/CMakeLists.txt).
file(GLOB svod_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md ${svod_docs}
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Debian's name for the licence of a package.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)

# `cpack -G DEB` (from a build folder): one package "svod" with the command,
# the libraries and plugins, the headers, the CMake package and the
# pkg-config file, and the Python package where Debian's python3 imports it
# (/usr/lib/python3/dist-packages: the install runs with prefix /usr and
# DESTDIR, so python/CMakeLists.txt asks the interpreter about /usr).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME svod)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kernel execution runtime for ML compilers")
set(CPACK_PACKAGE_DESCRIPTION "svod compiles kernels handed to it as source (C, LLVM IR, OpenCL C, CUDA C),
loads them with its own ELF loader and launches them, alone or as plans of
kernels, copies and host functions. This package holds the svod command, the
C++ runtime and C API libraries with their headers, CMake package
(find_package(svod)) and pkg-config file (svod), and the Python package svod.")
set(CPACK_PACKAGE_CONTACT "svod developers")
set(CPACK_PACKAGE_VENDOR "the svod developers")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_STRIP_FILES ON)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Shared-library dependencies as dpkg-shlibdeps finds them (libtbb12, libfmt9,
# libstdc++6, libopenmpi3 for the mpi plugin, ...); the libraries the plugins
# and the extension need from this package are found in the build tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
get_target_property(svod_runtime_binary_dir svod_runtime BINARY_DIR)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${svod_runtime_binary_dir})
# shlibs for libsvod_runtime.so.0 and libsvod_c.so.1, and ldconfig triggers.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# What svod opens or runs rather than links: clang (the clang and dlopen CPU
# backends run it; the llvm plugin takes clang's resource headers and the C
# library's headers from the same installation); the Python package's
# interpreter and numpy.
get_property(svod_llvm_version GLOBAL PROPERTY SVOD_LLVM_VERSION)
if(svod_llvm_version MATCHES "^([0-9]+)\\.")
  set(svod_deb_depends "clang-${CMAKE_MATCH_1}")
else()
  set(svod_deb_depends "clang")
endif()
get_property(svod_python_version GLOBAL PROPERTY SVOD_PYTHON_VERSION)  # python/CMakeLists.txt
if(TARGET svod_python AND svod_python_version MATCHES "^([0-9]+)\\.([0-9]+)$")
  math(EXPR svod_python_next_minor "${CMAKE_MATCH_2} + 1")
  # The extension is built for this one version's ABI.
  string(APPEND svod_deb_depends ", python3 (>= ${svod_python_version}),"
         " python3 (<< ${CMAKE_MATCH_1}.${svod_python_next_minor}), python3-numpy")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${svod_deb_depends}")
# Opened when used: the OpenCL ICD loader (the OpenCL device), libsodium
# (package signatures); building against the C++ headers and the CMake
# package needs fmt's and oneTBB's headers.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ocl-icd-libopencl1, libsodium23, libfmt-dev, libtbb-dev")
# Python writes svod/__pycache__ beside the package's files; it goes with them.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/deb/prerm)
# The libraries go into Debian's multiarch folder (/usr/lib/x86_64-linux-gnu),
# what GNUInstallDirs gives for the prefix /usr. The install rules' library
# folder is fixed when configuring, for the build tree's own prefix
# (/usr/local: lib, which `cmake --install --prefix` and the tests rely on),
# while cpack installs the same rules into /usr; so cmake/deb/multiarch.cmake,
# run on cpack's staging tree, moves the libraries, plugins, CMake package and
# pkg-config file from <prefix>/${CMAKE_INSTALL_LIBDIR} into the multiarch
# folder, fixes the paths the last two name, and drops the $ORIGIN RPATHs: in
# the package the command, libsvod_c and the Python extension find
# libsvod_runtime through the standard search path (ld.so.cache, which dpkg's
# ldconfig trigger updates), and the runtime its plugins beside itself.
if(CMAKE_LIBRARY_ARCHITECTURE AND EXISTS /etc/debian_version)
  set(CPACK_SVOD_DEB_LIBDIR lib/${CMAKE_LIBRARY_ARCHITECTURE})
else()
  set(CPACK_SVOD_DEB_LIBDIR lib)
endif()
set(CPACK_SVOD_CONFIGURED_LIBDIR ${CMAKE_INSTALL_LIBDIR})
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb/multiarch.cmake)
include(CPack)
