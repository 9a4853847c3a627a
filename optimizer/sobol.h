// The Sobol' low-discrepancy sequence in [0,1)^d, optionally scrambled.
//
// Direction numbers are generated here, not copied from a table:
//  - dimension 1 is the van der Corput sequence (identity generator matrix);
//  - dimension j >= 2 uses the (j-1)-th primitive polynomial over GF(2), in
//    order of degree and then of the polynomial's bit pattern, found by
//    search (PrimitivePolynomials); dimension 2 thus gets x + 1 with m_1 = 1;
//  - the initial direction numbers m_1..m_s of a degree-s polynomial are odd
//    with m_k < 2^k, drawn from a SplitMix64 stream with a fixed seed per
//    dimension (so a dimension's numbers do not depend on how many
//    dimensions are asked for); the rest follow Bratley and Fox's recurrence
//    (ACM TOMS 14(1), 1988).
// Odd m_k make every generator matrix unit upper triangular, so each single
// coordinate is a (0,m,1)-net in base 2 and dimensions 1 and 2 together a
// (0,m,2)-net. Random initial numbers do not give Sobol's property A.
//
// Scrambling (Matousek, "On the L2-discrepancy for anchored boxes", J.
// Complexity 14, 1998): a random lower-triangular binary matrix with unit
// diagonal multiplies each generator matrix, then a random digital shift is
// added, both drawn per dimension from the seed. Scrambling keeps the net
// properties, makes each point uniform on [0,1)^d and moves index 0 off the
// origin.
//
// Points have kBits = 52 binary digits, so they are exact doubles in [0,1).
// Immutable after construction; safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_SOBOL_H_
#define HYPERTUNE_OPTIMIZER_SOBOL_H_

#include <cstdint>
#include <vector>

#include <Eigen/Core>

namespace hypertune::optimizer {

class SobolSequence {
 public:
  // Dimension 1 plus one dimension per primitive polynomial of degree <= 13.
  static constexpr int kMaxDimension = 1111;
  // Binary digits per coordinate; also log2 of the number of distinct points.
  static constexpr int kBits = 52;

  // The scrambled sequence; each seed gives an independent scramble.
  // REQUIRES: 1 <= dim <= kMaxDimension
  SobolSequence(int dim, uint64_t seed);

  // The plain sequence, whose point 0 is the origin.
  // REQUIRES: 1 <= dim <= kMaxDimension
  static SobolSequence Unscrambled(int dim);

  int dim() const { return dim_; }

  // Returns point number `index` (random access, O(dim * log2(index))).
  // REQUIRES: 0 <= index < 2^kBits
  Eigen::VectorXd Point(int64_t index) const;

 private:
  SobolSequence(int dim, bool scramble, uint64_t seed);

  int dim_;
  // directions_[j * kBits + k]: column k of dimension j's generator matrix,
  // the digits of 2^kBits * v_{k+1} (bit kBits - 1 weighs 1/2).
  std::vector<uint64_t> directions_;
  // The digital shift per dimension, zero when unscrambled.
  std::vector<uint64_t> shift_;
};

// Polynomials over GF(2) are bit patterns: bit k is the coefficient of x^k.

// Returns true if `poly` is primitive: of degree s >= 1 and such that x has
// multiplicative order 2^s - 1 in GF(2)[x] / (poly). Degree at most 31.
bool IsPrimitivePolynomial(uint64_t poly);

// Returns the first `count` primitive polynomials in order of degree, then of
// value: x+1, x^2+x+1, x^3+x+1, x^3+x^2+1, ...
// REQUIRES: 0 <= count < 2^20 (degree stays below 32)
std::vector<uint64_t> PrimitivePolynomials(int count);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_SOBOL_H_
