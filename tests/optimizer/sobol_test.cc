#include "optimizer/sobol.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace hypertune::optimizer {
namespace {

// Euler's totient, for counting primitive polynomials independently of the
// search: there are phi(2^s - 1) / s of degree s.
uint64_t Totient(uint64_t n) {
  uint64_t result = n;
  for (uint64_t q = 2; q * q <= n; ++q) {
    if (n % q != 0) continue;
    while (n % q == 0) n /= q;
    result -= result / q;
  }
  if (n > 1) result -= result / n;
  return result;
}

int Degree(uint64_t poly) {
  int d = -1;
  for (; poly != 0; poly >>= 1) ++d;
  return d;
}

// Returns true if each of the 2^m cells [k/2^m, (k+1)/2^m) of coordinate
// `dim` holds exactly one of points [first, first + 2^m).
bool Stratified(const SobolSequence& s, int dim, int64_t first, int m) {
  const int64_t n = int64_t{1} << m;
  std::vector<int> hits(n, 0);
  for (int64_t i = first; i < first + n; ++i) {
    ++hits[static_cast<int64_t>(std::floor(s.Point(i)[dim] * n))];
  }
  for (int h : hits) {
    if (h != 1) return false;
  }
  return true;
}

// Returns true if the first 2^m points of coordinates 0 and 1 put exactly one
// point into each elementary box of shape 2^-a x 2^-(m-a), for every a.
bool IsZeroMTwoNet(const SobolSequence& s, int m) {
  const int64_t n = int64_t{1} << m;
  for (int a = 0; a <= m; ++a) {
    std::set<std::pair<int64_t, int64_t>> boxes;
    for (int64_t i = 0; i < n; ++i) {
      const Eigen::VectorXd p = s.Point(i);
      boxes.insert(
          {static_cast<int64_t>(std::floor(p[0] * (int64_t{1} << a))),
           static_cast<int64_t>(std::floor(p[1] * (int64_t{1} << (m - a))))});
    }
    if (static_cast<int64_t>(boxes.size()) != n) return false;
  }
  return true;
}

TEST(PrimitivePolynomialTest, KnownSmallCases) {
  EXPECT_TRUE(IsPrimitivePolynomial(0b11));      // x + 1
  EXPECT_TRUE(IsPrimitivePolynomial(0b111));     // x^2 + x + 1
  EXPECT_TRUE(IsPrimitivePolynomial(0b1011));    // x^3 + x + 1
  EXPECT_TRUE(IsPrimitivePolynomial(0b10011));   // x^4 + x + 1
  EXPECT_FALSE(IsPrimitivePolynomial(0b10));     // x
  EXPECT_FALSE(IsPrimitivePolynomial(0b101));    // (x + 1)^2
  EXPECT_FALSE(IsPrimitivePolynomial(0b10101));  // (x^2 + x + 1)^2
  // Irreducible but not primitive: x has order 5, not 15.
  EXPECT_FALSE(IsPrimitivePolynomial(0b11111));
  EXPECT_FALSE(IsPrimitivePolynomial(0b1110));  // divisible by x
}

TEST(PrimitivePolynomialTest, GeneratedPolynomialsArePrimitiveDistinctAndAll) {
  const std::vector<uint64_t> polys =
      PrimitivePolynomials(SobolSequence::kMaxDimension - 1);
  ASSERT_EQ(polys.size(), SobolSequence::kMaxDimension - 1);
  EXPECT_EQ(polys[0], 0b11u);
  EXPECT_EQ(polys[1], 0b111u);
  EXPECT_EQ(std::set<uint64_t>(polys.begin(), polys.end()).size(),
            polys.size());
  std::vector<uint64_t> per_degree(14, 0);
  for (uint64_t p : polys) {
    ASSERT_TRUE(IsPrimitivePolynomial(p)) << p;
    ASSERT_LE(Degree(p), 13);
    ++per_degree[Degree(p)];
  }
  for (int s = 1; s <= 13; ++s) {
    EXPECT_EQ(per_degree[s], Totient((uint64_t{1} << s) - 1) / s)
        << "degree " << s;
  }
  // Cross-check primitivity by brute force for small degrees: x's powers
  // must run through every non-zero residue before returning to 1.
  for (uint64_t p : polys) {
    const int s = Degree(p);
    if (s > 10) break;
    uint64_t r = 1;
    int order = 0;
    do {
      r <<= 1;
      if (r >> s) r ^= p;
      ++order;
    } while (r != 1);
    EXPECT_EQ(order, (1 << s) - 1) << p;
  }
}

TEST(SobolTest, UnscrambledStartsAtTheOriginAndMatchesKnownPoints) {
  const SobolSequence s = SobolSequence::Unscrambled(2);
  EXPECT_EQ(s.Point(0), Eigen::Vector2d(0, 0));
  // Dimension 1 is van der Corput; dimension 2 (x + 1, m_1 = 1) the
  // classical second Sobol coordinate: 0, 1/2, 3/4, 1/4, 5/8, 1/8, 3/8, 7/8.
  const double second[] = {0, 0.5, 0.75, 0.25, 0.625, 0.125, 0.375, 0.875};
  const double first[] = {0, 0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(s.Point(i)[0], first[i]) << i;
    EXPECT_EQ(s.Point(i)[1], second[i]) << i;
  }
}

TEST(SobolTest, ScrambledDoesNotStartAtTheOrigin) {
  const Eigen::VectorXd p = SobolSequence(5, 0).Point(0);
  EXPECT_GT(p.norm(), 0.0);
}

TEST(SobolTest, EachCoordinateIsStratified) {
  const std::vector<SobolSequence> sequences = {SobolSequence::Unscrambled(40),
                                                SobolSequence(40, 0),
                                                SobolSequence(40, 12345)};
  for (const SobolSequence& s : sequences) {
    for (int dim = 0; dim < s.dim(); ++dim) {
      for (int m = 0; m <= 10; ++m) {
        EXPECT_TRUE(Stratified(s, dim, 0, m)) << "dim " << dim << " m " << m;
      }
      // Later aligned blocks too, as a study resumes mid-sequence.
      EXPECT_TRUE(Stratified(s, dim, 3 * 64, 6)) << "dim " << dim;
    }
  }
}

TEST(SobolTest, HighDimensionsAreStratified) {
  const SobolSequence s(SobolSequence::kMaxDimension, 3);
  for (int dim : {500, 999, SobolSequence::kMaxDimension - 1}) {
    EXPECT_TRUE(Stratified(s, dim, 0, 9)) << dim;
  }
}

TEST(SobolTest, FirstTwoDimensionsFormAZeroMTwoNet) {
  for (int m = 0; m <= 8; ++m) {
    EXPECT_TRUE(IsZeroMTwoNet(SobolSequence::Unscrambled(2), m)) << m;
    EXPECT_TRUE(IsZeroMTwoNet(SobolSequence(2, 0), m)) << m;
    EXPECT_TRUE(IsZeroMTwoNet(SobolSequence(3, 99), m)) << m;
  }
}

TEST(SobolTest, PointsLieInTheHalfOpenUnitCube) {
  for (const SobolSequence& s :
       {SobolSequence::Unscrambled(100), SobolSequence(100, 1)}) {
    for (int64_t i :
         {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{65535},
          (int64_t{1} << 40) + 17, (int64_t{1} << SobolSequence::kBits) - 1}) {
      const Eigen::VectorXd p = s.Point(i);
      EXPECT_TRUE((p.array() >= 0).all() && (p.array() < 1).all()) << i;
    }
    for (int64_t i = 0; i < 4096; ++i) {
      const Eigen::VectorXd p = s.Point(i);
      ASSERT_TRUE((p.array() >= 0).all() && (p.array() < 1).all()) << i;
    }
  }
}

TEST(SobolTest, SeedsDecideTheScramble) {
  const SobolSequence a(8, 1), a_again(8, 1), b(8, 2);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(a.Point(i), a_again.Point(i));
    // Each coordinate differs: the scrambles of distinct seeds are
    // independent, and a collision of 52-bit values is vanishingly unlikely.
    EXPECT_TRUE((a.Point(i).array() != b.Point(i).array()).all()) << i;
  }
}

TEST(SobolTest, DimensionsDoNotDependOnHowManyAreAsked) {
  const SobolSequence small(3, 5), large(30, 5);
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(small.Point(i), large.Point(i).head(3));
  }
}

TEST(SobolTest, MeanIsCloseToOneHalf) {
  for (const SobolSequence& s :
       {SobolSequence::Unscrambled(20), SobolSequence(20, 7)}) {
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(20);
    for (int64_t i = 0; i < 4096; ++i) sum += s.Point(i);
    const Eigen::VectorXd mean = sum / 4096;
    for (int j = 0; j < 20; ++j) {
      // A stratified coordinate's mean is within half a cell of 1/2.
      EXPECT_NEAR(mean[j], 0.5, 1.0 / 4096) << j;
    }
  }
}

TEST(SobolTest, PairsOfCoordinatesAreUncorrelated) {
  const SobolSequence s(20, 11);
  constexpr int kN = 4096;
  std::vector<Eigen::VectorXd> points;
  for (int64_t i = 0; i < kN; ++i) points.push_back(s.Point(i));
  for (int a = 0; a < 20; ++a) {
    for (int b = a + 1; b < 20; ++b) {
      double cov = 0;
      for (const Eigen::VectorXd& p : points) {
        cov += (p[a] - 0.5) * (p[b] - 0.5);
      }
      // Variance of one coordinate is 1/12; random points would give a
      // correlation of about 1/sqrt(4096) = 0.016.
      EXPECT_LT(std::abs(cov / kN * 12), 0.05) << a << "," << b;
    }
  }
}

}  // namespace
}  // namespace hypertune::optimizer
