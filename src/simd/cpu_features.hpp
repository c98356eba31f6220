// CPU features read from CPUID directly, the same way under GCC and clang (clang's
// __builtin_cpu_supports does not know every feature name GCC's does, e.g. "avxvnni"). Each is
// false on other architectures.
#pragma once

namespace kvsketch::simd {

// AVX-VNNI: the VEX-encoded vpdpbusd on 256-bit vectors (Alder Lake and later, Zen 5).
bool cpu_has_avx_vnni();
// AVX512-VNNI: vpdpbusd on EVEX vectors (Cascade Lake, Ice Lake, Zen 4 and later).
bool cpu_has_avx512_vnni();

}  // namespace kvsketch::simd
