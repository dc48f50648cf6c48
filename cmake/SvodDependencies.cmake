# Third-party libraries, all from Debian packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
# XXH3 is compiled into the runtime from the header (svod/base/hash.cpp).
pkg_check_modules(XXHASH REQUIRED libxxhash)
