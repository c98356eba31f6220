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

bool machine_has_amx() {
#if defined(__x86_64__) && defined(__linux__) && !defined(KVSKETCH_PORTABLE)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), int8 = d & (1u << 25);
  if (!tile || !int8) return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const unsigned tile_state = (1u << 17) | (1u << 18);  // XTILECFG, XTILEDATA
  if ((xcr0_low & tile_state) != tile_state) return false;
  // Linux hands out the 8 KB of tile data per process on request (ARCH_REQ_XCOMP_PERM).
  constexpr long kRequestPermission = 0x1023, kTileData = 18;
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}

bool environment_allows() {
  const char* setting = std::getenv("KVSKETCH_AMX");
  return setting == nullptr || std::strcmp(setting, "0") != 0;
}

std::atomic<bool> allowed{true};

}  // namespace

bool amx_usable() {
  static const bool available = machine_has_amx() && environment_allows();
  return available && allowed.load(std::memory_order_relaxed);
}

bool set_amx_allowed(bool value) { return allowed.exchange(value); }

}  // namespace kvsketch::simd
