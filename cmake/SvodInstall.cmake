# `cmake --install` lays out headers, libsvod_runtime, libsvod_c and an
# exported package: find_package(svod CONFIG) then gives the targets
# svod::runtime (C++) and svod::c (the C API, <svod/svod.h>), and
# pkg-config finds the C API as `svod`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS svod_runtime svod_c EXPORT svodTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# (The *_internal.h headers are private to their folders: the backends' name
# driver types the public headers keep opaque, expr_internal.h holds Expr's
# instruction set.)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/svod DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "capi" EXCLUDE PATTERN "*_internal.h" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/svod/capi/svod.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/svod)

# svod.pc names its prefix relative to its own folder, so the installed tree
# works wherever `cmake --install --prefix` put it. It is made aside, in
# CMakeFiles/, where PKG_CONFIG_PATH=<build> does not find it: its paths are
# those of an installation.
get_target_property(SVOD_C_VERSION svod_c VERSION)
file(RELATIVE_PATH SVOD_PC_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" SVOD_PC_PREFIX "${SVOD_PC_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/svod.pc.in ${PROJECT_BINARY_DIR}/CMakeFiles/svod.pc @ONLY)
file(REMOVE ${PROJECT_BINARY_DIR}/svod.pc)  # one that an earlier configuration made there
install(FILES ${PROJECT_BINARY_DIR}/CMakeFiles/svod.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The build tree's own, svod-uninstalled.pc in its root: the header and the
# library where this build has them (the header folder is svod_c's build
# interface, the one CMake projects inside the build get too).
set(SVOD_PC_BUILD_DIR ${PROJECT_BINARY_DIR})
set(SVOD_PC_BUILD_INCLUDEDIR "$<TARGET_PROPERTY:svod_c,INTERFACE_INCLUDE_DIRECTORIES>")
set(SVOD_PC_BUILD_LIBDIR "$<TARGET_FILE_DIR:svod_c>")
configure_file(${PROJECT_SOURCE_DIR}/cmake/svod-uninstalled.pc.in ${PROJECT_BINARY_DIR}/CMakeFiles/svod-uninstalled.pc.in
               @ONLY)
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/svod-uninstalled.pc INPUT ${PROJECT_BINARY_DIR}/CMakeFiles/svod-uninstalled.pc.in)
install(EXPORT svodTargets NAMESPACE svod:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/svod)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/svodConfig.cmake.in
  ${PROJECT_BINARY_DIR}/svodConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/svod)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/svodConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/svodConfig.cmake ${PROJECT_BINARY_DIR}/svodConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/svod)

# The llvm backend's and the mpi communicator's plugins go beside
# libsvod_runtime, where the runtime looks for them.
if(TARGET svod_llvm)
  install(TARGETS svod_llvm LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(TARGET svod_comm_mpi)
  install(TARGETS svod_comm_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
