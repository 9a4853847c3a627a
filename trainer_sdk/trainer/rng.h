// Rng: a small, portable pseudo-random generator (splitmix64) for parameter
// initialization and synthetic data, so a seed gives the same numbers on
// every platform and standard library (std::normal_distribution does not).
//
// Thread safety: none; one Rng per thread.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_RNG_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_RNG_H_

#include <cmath>
#include <cstdint>

namespace hypertune::train {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return double(Next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_RNG_H_
