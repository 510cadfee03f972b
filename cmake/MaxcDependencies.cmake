# Third-party dependencies, all from Debian packages (scripts/install-deps).
# LLVM is pinned to 19.1: plain "19" is rejected by LLVM's config version file.
find_package(LLVM 19.1 REQUIRED CONFIG HINTS /usr/lib/llvm-19/lib/cmake/llvm)
message(STATUS "maxc: LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")
find_package(nlohmann_json 3 REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto) # SHA-256 (libssl-dev)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
# LLD as a library (liblld-19-dev): joins a CPU model's partition objects
# (ld -r) and links AMDGPU code objects in process (lib/Codegen/LldLink.cpp);
# without it, an ld.lld subprocess does.
find_package(LLD CONFIG QUIET HINTS "${LLVM_LIBRARY_DIR}/cmake/lld")
message(STATUS "maxc: LLD as a library: ${LLD_FOUND}")
