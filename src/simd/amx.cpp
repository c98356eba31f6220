#include "simd/amx.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__) && !defined(KVSKETCH_PORTABLE)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvsketch::simd {
namespace {

// The AMX units the CPU has and the OS lets this process use: bit 0 INT8, bit 1 BF16 (with the
// AVX512-BF16 conversions that come with it on every such CPU).
enum : unsigned { kInt8 = 1, kBf16 = 2 };

unsigned machine_amx_units() {
#if defined(__x86_64__) && defined(__linux__) && !defined(KVSKETCH_PORTABLE)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;  // OSXSAVE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  const bool tile = d & (1u << 24);
  const unsigned units = ((d & (1u << 25)) ? kInt8 : 0u) | ((d & (1u << 22)) ? kBf16 : 0u);
  if (!tile || units == 0) return 0;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const unsigned tile_state = (1u << 17) | (1u << 18);  // XTILECFG, XTILEDATA
  if ((xcr0_low & tile_state) != tile_state) return 0;
  // Linux hands out the 8 KB of tile data per process on request (ARCH_REQ_XCOMP_PERM).
  constexpr long kRequestPermission = 0x1023, kTileData = 18;
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0 ? units : 0u;
#else
  return 0;
#endif
}

bool environment_allows() {
  const char* setting = std::getenv("KVSKETCH_AMX");
  return setting == nullptr || std::strcmp(setting, "0") != 0;
}

std::atomic<bool> allowed{true};

unsigned usable_units() {
  static const unsigned units = environment_allows() ? machine_amx_units() : 0u;
  return allowed.load(std::memory_order_relaxed) ? units : 0u;
}

}  // namespace

bool amx_usable() { return (usable_units() & kInt8) != 0; }

bool amx_bf16_usable() { return (usable_units() & kBf16) != 0; }

bool set_amx_allowed(bool value) { return allowed.exchange(value); }

}  // namespace kvsketch::simd
