// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a tiny generator used to derive independent,
// reproducible seeds and bits from a few integers. Pure functions; the
// generator object is not shared between threads.
#ifndef HYPERTUNE_OPTIMIZER_SPLITMIX_H_
#define HYPERTUNE_OPTIMIZER_SPLITMIX_H_

#include <cmath>
#include <cstdint>

namespace hypertune::optimizer {

// The SplitMix64 finalizer: a bijective mix of all 64 bits.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Returns a seed that depends on both inputs and their order; nearby inputs
// give unrelated seeds.
inline uint64_t MixSeeds(uint64_t a, uint64_t b) {
  return Mix64(Mix64(a + 0x9e3779b97f4a7c15ULL) ^ b);
}

// The SplitMix64 sequence from `seed`.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ULL); }

  // Uniform in [0, 1) with 53 random bits.
  double NextUnit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Standard normal by Box-Muller from two uniforms: the same stream gives
  // the same draws on every platform, unlike std::normal_distribution.
  double NextNormal() {
    const double u1 = 1.0 - NextUnit(), u2 = NextUnit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_SPLITMIX_H_
