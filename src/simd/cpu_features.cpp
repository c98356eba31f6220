#include "simd/cpu_features.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && !defined(KVSKETCH_PORTABLE)
#include <cpuid.h>
#endif

namespace kvsketch::simd {
namespace {

// CPUID leaf 7's registers for the sub-leaf, or zeros where the leaf does not exist.
struct Leaf7 {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Leaf7 leaf7(unsigned subleaf) {
  Leaf7 r;
#if (defined(__x86_64__) || defined(__i386__)) && !defined(KVSKETCH_PORTABLE)
  if (!__get_cpuid_count(7, subleaf, &r.a, &r.b, &r.c, &r.d)) return {};
#else
  (void)subleaf;
#endif
  return r;
}

}  // namespace

bool cpu_has_avx_vnni() {
  static const bool has = (leaf7(1).a >> 4) & 1u;  // CPUID.(7,1):EAX[4]
  return has;
}

bool cpu_has_avx512_vnni() {
  static const bool has = (leaf7(0).c >> 11) & 1u;  // CPUID.(7,0):ECX[11]
  return has;
}

}  // namespace kvsketch::simd
