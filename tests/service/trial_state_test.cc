// The trial state machine: every pair of states, legal or not, against the
// table of trial states in docs/concepts.md.
#include "service/rpc/trial_state.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;
using State = v1::Trial::State;

constexpr State kStates[] = {
    v1::Trial::STATE_UNSPECIFIED, v1::Trial::REQUESTED,  v1::Trial::ACTIVE,
    v1::Trial::STOPPING,          v1::Trial::PAUSED,     v1::Trial::COMPLETED,
    v1::Trial::STOPPED,           v1::Trial::INFEASIBLE, v1::Trial::FAILED};

// docs/concepts.md: REQUESTED -> ACTIVE -> COMPLETED | INFEASIBLE | FAILED;
// ACTIVE
// -> STOPPING -> STOPPED; ACTIVE -> PAUSED -> ACTIVE; ACTIVE -> REQUESTED
// when a lease runs out with retries left; new trials are queued, granted
// or known results; stopping by hand ends REQUESTED and PAUSED trials.
const std::set<std::pair<State, State>>& Legal() {
  static const auto* legal = new std::set<std::pair<State, State>>{
      {v1::Trial::STATE_UNSPECIFIED, v1::Trial::REQUESTED},
      {v1::Trial::STATE_UNSPECIFIED, v1::Trial::ACTIVE},
      {v1::Trial::STATE_UNSPECIFIED, v1::Trial::COMPLETED},
      {v1::Trial::REQUESTED, v1::Trial::ACTIVE},
      {v1::Trial::REQUESTED, v1::Trial::STOPPED},
      {v1::Trial::ACTIVE, v1::Trial::COMPLETED},
      {v1::Trial::ACTIVE, v1::Trial::INFEASIBLE},
      {v1::Trial::ACTIVE, v1::Trial::FAILED},
      {v1::Trial::ACTIVE, v1::Trial::STOPPING},
      {v1::Trial::ACTIVE, v1::Trial::PAUSED},
      {v1::Trial::ACTIVE, v1::Trial::REQUESTED},
      {v1::Trial::STOPPING, v1::Trial::STOPPED},
      {v1::Trial::STOPPING, v1::Trial::INFEASIBLE},
      {v1::Trial::PAUSED, v1::Trial::ACTIVE},
      {v1::Trial::PAUSED, v1::Trial::STOPPED},
  };
  return *legal;
}

TEST(TrialStateTest, EveryPairIsLegalExactlyAsTheDesignSays) {
  int legal = 0;
  for (State from : kStates) {
    for (State to : kStates) {
      const bool expected = Legal().contains({from, to});
      EXPECT_EQ(IsLegalTransition(from, to), expected)
          << v1::Trial::State_Name(from) << " -> " << v1::Trial::State_Name(to);
      v1::Trial trial;
      trial.set_id(3);
      trial.set_study_name("s");
      trial.set_state(from);
      absl::Status status = Transition(trial, to);
      EXPECT_EQ(status.ok(), expected);
      if (expected) {
        ++legal;
        EXPECT_EQ(trial.state(), to);
      } else {
        // Refused changes change nothing and say what was refused.
        EXPECT_EQ(trial.state(), from);
        EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
        EXPECT_THAT(std::string(status.message()),
                    HasSubstr(absl::StrCat(v1::Trial::State_Name(from), " -> ",
                                           v1::Trial::State_Name(to))));
      }
    }
  }
  EXPECT_EQ(legal, static_cast<int>(Legal().size()));
}

TEST(TrialStateTest, FinalStatesHaveNoWayOut) {
  for (State from : kStates) {
    bool leaves = false;
    for (State to : kStates) leaves = leaves || IsLegalTransition(from, to);
    EXPECT_EQ(IsFinal(from), !leaves) << v1::Trial::State_Name(from);
  }
  EXPECT_TRUE(IsFinal(v1::Trial::COMPLETED));
  EXPECT_FALSE(IsFinal(v1::Trial::PAUSED));
}

}  // namespace
}  // namespace hypertune::service
