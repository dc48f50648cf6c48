# `cmake --install` lays out headers, libsvod_runtime and an exported package:
# find_package(svod CONFIG) then gives the target svod::runtime.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS svod_runtime EXPORT svodTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/svod DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
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
