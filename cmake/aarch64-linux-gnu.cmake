# Cross-compiling for 64-bit Arm with Debian's multiarch toolchain (g++-aarch64-linux-gnu) against
# the arm64 packages under /usr/lib/aarch64-linux-gnu; tests run under qemu-user
# (scripts/cross_aarch64.sh sets everything up).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
# Programs (protoc-like tools) from the host; libraries, headers and packages for the target only.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
