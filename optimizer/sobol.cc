#include "optimizer/sobol.h"

#include <bit>
#include <cassert>
#include <cstdint>
#include <vector>

#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

// Seeds the initial direction numbers; fixed forever, since changing it
// changes every unscrambled and scrambled sequence.
constexpr uint64_t kDirectionSeed = 0x50b01d1ec7104bULL;

constexpr uint64_t kDigitMask = (uint64_t{1} << SobolSequence::kBits) - 1;
// The weight of the least significant digit, 2^-kBits.
static_assert(SobolSequence::kBits == 52);
constexpr double kUlp = 0x1.0p-52;

int Degree(uint64_t poly) { return 63 - std::countl_zero(poly); }

// a * b mod poly over GF(2). REQUIRES: a, b of degree < s = Degree(poly).
uint64_t MulMod(uint64_t a, uint64_t b, uint64_t poly, int s) {
  const uint64_t top = uint64_t{1} << s;
  uint64_t r = 0;
  for (; b != 0; b >>= 1) {
    if (b & 1) r ^= a;
    a <<= 1;
    if (a & top) a ^= poly;
  }
  return r;
}

uint64_t PowMod(uint64_t a, uint64_t e, uint64_t poly, int s) {
  uint64_t r = 1;
  for (; e != 0; e >>= 1) {
    if (e & 1) r = MulMod(r, a, poly, s);
    a = MulMod(a, a, poly, s);
  }
  return r;
}

std::vector<uint64_t> PrimeFactors(uint64_t n) {
  std::vector<uint64_t> primes;
  for (uint64_t q = 2; q * q <= n; ++q) {
    if (n % q != 0) continue;
    primes.push_back(q);
    while (n % q == 0) n /= q;
  }
  if (n > 1) primes.push_back(n);
  return primes;
}

}  // namespace

bool IsPrimitivePolynomial(uint64_t poly) {
  if (poly < 2) return false;
  const int s = Degree(poly);
  if (s > 31 || (poly & 1) == 0) return false;  // x divides poly.
  // x reduced mod poly: only x + 1 itself needs the reduction.
  const uint64_t x = s == 1 ? (2 ^ poly) : 2;
  const uint64_t order = (uint64_t{1} << s) - 1;
  if (PowMod(x, order, poly, s) != 1) return false;
  for (uint64_t q : PrimeFactors(order)) {
    if (PowMod(x, order / q, poly, s) == 1) return false;
  }
  return true;
}

std::vector<uint64_t> PrimitivePolynomials(int count) {
  assert(count >= 0 && count < (1 << 20));
  std::vector<uint64_t> polys;
  polys.reserve(count);
  for (uint64_t poly = 3; static_cast<int>(polys.size()) < count; poly += 2) {
    if (IsPrimitivePolynomial(poly)) polys.push_back(poly);
  }
  return polys;
}

SobolSequence::SobolSequence(int dim, uint64_t seed)
    : SobolSequence(dim, /*scramble=*/true, seed) {}

SobolSequence SobolSequence::Unscrambled(int dim) {
  return SobolSequence(dim, /*scramble=*/false, 0);
}

SobolSequence::SobolSequence(int dim, bool scramble, uint64_t seed)
    : dim_(dim), directions_(static_cast<size_t>(dim) * kBits), shift_(dim) {
  assert(dim >= 1 && dim <= kMaxDimension);
  const std::vector<uint64_t> polys = PrimitivePolynomials(dim - 1);
  // m[k - 1] holds m_k, with m_k odd and m_k < 2^k.
  uint64_t m[kBits];
  for (int j = 0; j < dim; ++j) {
    if (j == 0) {
      for (int k = 1; k <= kBits; ++k) m[k - 1] = 1;  // van der Corput.
    } else {
      const uint64_t poly = polys[j - 1];
      const int s = Degree(poly);
      SplitMix64 rng(MixSeeds(kDirectionSeed, static_cast<uint64_t>(j)));
      for (int k = 1; k <= s; ++k) {
        const uint64_t below = (uint64_t{1} << (k - 1)) - 1;
        m[k - 1] = ((rng.Next() & below) << 1) | 1;
      }
      // Bratley-Fox: for poly = x^s + a_1 x^(s-1) + ... + a_(s-1) x + 1,
      // m_k = 2 a_1 m_(k-1) ^ 4 a_2 m_(k-2) ^ ... ^ 2^s m_(k-s) ^ m_(k-s).
      for (int k = s + 1; k <= kBits; ++k) {
        uint64_t mk = m[k - s - 1] ^ (m[k - s - 1] << s);
        for (int i = 1; i < s; ++i) {
          if ((poly >> (s - i)) & 1) mk ^= m[k - i - 1] << i;
        }
        m[k - 1] = mk;
      }
    }
    uint64_t* columns = &directions_[static_cast<size_t>(j) * kBits];
    for (int k = 1; k <= kBits; ++k) columns[k - 1] = m[k - 1] << (kBits - k);

    if (!scramble) continue;
    SplitMix64 rng(MixSeeds(seed, static_cast<uint64_t>(j)));
    // Row b of the scramble: output digit at bit b is the parity of the input
    // digits at b and (randomly) above it, i.e. lower triangular when digits
    // are ordered from the most significant.
    uint64_t rows[kBits];
    for (int b = 0; b < kBits; ++b) {
      const uint64_t above = kDigitMask & ~((uint64_t{2} << b) - 1);
      rows[b] = (uint64_t{1} << b) | (rng.Next() & above);
    }
    for (int k = 0; k < kBits; ++k) {
      uint64_t scrambled = 0;
      for (int b = 0; b < kBits; ++b) {
        scrambled |=
            static_cast<uint64_t>(std::popcount(rows[b] & columns[k]) & 1) << b;
      }
      columns[k] = scrambled;
    }
    shift_[j] = rng.Next() & kDigitMask;
  }
}

Eigen::VectorXd SobolSequence::Point(int64_t index) const {
  assert(index >= 0 && static_cast<uint64_t>(index) <= kDigitMask);
  std::vector<uint64_t> digits(shift_);
  for (int k = 0; index != 0; ++k, index >>= 1) {
    if ((index & 1) == 0) continue;
    for (int j = 0; j < dim_; ++j) {
      digits[j] ^= directions_[static_cast<size_t>(j) * kBits + k];
    }
  }
  Eigen::VectorXd point(dim_);
  for (int j = 0; j < dim_; ++j) {
    point[j] = static_cast<double>(digits[j]) * kUlp;
  }
  return point;
}

}  // namespace hypertune::optimizer
