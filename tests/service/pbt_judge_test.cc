// JudgePbtMember (service/rpc/pbt.h) on stored trials: who may donate, and
// that a member judged again at the same step draws afresh.

#include "service/rpc/pbt.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"

namespace hypertune::service {
namespace {

template <typename T>
T Parse(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message))
      << text;
  return message;
}

// Four members, interval 2: the bottom and top quantiles are one each.
const v1::Study kStudy = Parse<v1::Study>(R"pb(
  name: "pbt"
  spec {
    algorithm: PBT
    seed: 7
    pbt { population_size: 4 perturbation_interval: 2 }
    parameters { name: "lr" double_spec { min: 0.0001 max: 1 } }
    metrics { name: "acc" goal: MAXIMIZE }
  }
)pb");

// Member `id` at `acc` on step `step`, holding a checkpoint of that step.
v1::Trial Member(int id, double acc, int step, double lr = 0.1) {
  return Parse<v1::Trial>(absl::StrCat(
      "id: ", id, " state: ACTIVE parameters { name: 'lr' double_value: ", lr,
      " } measurements { step: ", step, " metrics { key: 'acc' value: ", acc,
      " } } checkpoint_uri: 'file:///c/", id, "' checkpoint_step: ", step));
}

TEST(PbtJudgeTest, TheBottomMemberTakesTheTopMembersCheckpoint) {
  std::vector<v1::Trial> population = {Member(1, 0.9, 4), Member(2, 0.8, 4),
                                       Member(3, 0.5, 4), Member(4, 0.1, 4)};
  v1::Trial member = population[3];
  ASSERT_TRUE(*JudgePbtMember(kStudy, population, member, 1000));
  ASSERT_EQ(member.exploits_size(), 1);
  EXPECT_EQ(member.exploits(0).donor_trial_id(), 1);
  EXPECT_EQ(member.checkpoint_uri(), "file:///c/1");
}

// Trial 1 tops the population with the value it took from trial 2 one step
// ago: it holds trial 2's checkpoint and untried parameters, so it gives
// nothing until it trained an interval on them (no cascade down a chain).
TEST(PbtJudgeTest, AMemberThatJustExploitedIsNoDonor) {
  v1::Trial fresh = Member(1, 0.9, 4);
  fresh.set_checkpoint_uri("file:///c/2");
  v1::PbtExploit* e = fresh.add_exploits();
  e->set_number(1);
  e->set_step(4);
  e->set_donor_trial_id(2);
  e->set_checkpoint_uri("file:///c/2");
  e->set_checkpoint_step(4);
  std::vector<v1::Trial> population = {fresh, Member(2, 0.8, 4),
                                       Member(3, 0.5, 4), Member(4, 0.1, 4)};
  v1::Trial member = population[3];
  EXPECT_FALSE(*JudgePbtMember(kStudy, population, member, 1000));
  EXPECT_EQ(member.exploits_size(), 0);

  // Once it saved its own checkpoint an interval on, it may give it.
  population[0].mutable_measurements(0)->set_step(6);
  population[0].set_checkpoint_uri("file:///c/1");
  population[0].set_checkpoint_step(6);
  member = population[3];
  ASSERT_TRUE(*JudgePbtMember(kStudy, population, member, 1000));
  EXPECT_EQ(member.exploits(0).donor_trial_id(), 1);
  EXPECT_EQ(member.checkpoint_step(), 6);
}

// The same member at the same step, once before and once after an earlier
// exploit: the explore step draws differently (it repeated its draws).
TEST(PbtJudgeTest, AMemberJudgedAgainAtTheSameStepDrawsAfresh) {
  v1::Study study = kStudy;
  study.mutable_spec()->mutable_pbt()->set_resample_probability(1.0);
  std::vector<v1::Trial> population = {Member(1, 0.9, 4), Member(2, 0.8, 4),
                                       Member(3, 0.5, 4), Member(4, 0.1, 4)};
  v1::Trial first = population[3];
  ASSERT_TRUE(*JudgePbtMember(study, population, first, 1000));
  v1::Trial again = population[3];
  *again.add_exploits() = first.exploits(0);
  ASSERT_TRUE(*JudgePbtMember(study, population, again, 2000));
  ASSERT_EQ(again.exploits_size(), 2);
  EXPECT_NE(first.exploits(0).parameters(0).double_value(),
            again.exploits(1).parameters(0).double_value());
}

}  // namespace
}  // namespace hypertune::service
