// The layout of a service_fuzzer input, shared by the fuzzer and the program
// that writes its seed corpus.
//
//   byte 0   selector: bits 0-3 the RPC (kRpcCount of them, taken modulo),
//            kJson: the rest is the protobuf JSON mapping instead of binary,
//            kAim: point the request at a seeded study and trial (study name,
//              trial id, lease epoch and count fixed up) so that the fuzzer
//              reaches past the lookups,
//            kGpStudy: with kAim, the GP_BANDIT study instead of the RANDOM
//              one,
//            kLeasesRunOut: move the clock past every lease first.
//   byte 1.. the request message.
#ifndef HYPERTUNE_TESTS_FUZZ_FUZZ_INPUT_H_
#define HYPERTUNE_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstdint>

namespace hypertune::fuzz {

enum class Rpc : uint8_t {
  kCreateStudy,
  kGetStudy,
  kListStudies,
  kDeleteStudy,
  kSetStudyState,
  kSuggestTrials,
  kCreateTrial,
  kGetTrial,
  kListTrials,
  kAddMeasurement,
  kCompleteTrial,
  kListOptimalTrials,
  kHeartbeat,
  kCheckEarlyStopping,
  kStopTrial,
  kSetStudyOwner,
};
inline constexpr int kRpcCount = 16;

inline constexpr uint8_t kRpcMask = 0x0f;
inline constexpr uint8_t kJson = 0x10;
inline constexpr uint8_t kAim = 0x20;
inline constexpr uint8_t kGpStudy = 0x40;
inline constexpr uint8_t kLeasesRunOut = 0x80;

// The seeded studies (see service_fuzzer.cc).
inline constexpr char kRandomStudy[] = "s";
inline constexpr char kGpStudyName[] = "g";

}  // namespace hypertune::fuzz

#endif  // HYPERTUNE_TESTS_FUZZ_FUZZ_INPUT_H_
