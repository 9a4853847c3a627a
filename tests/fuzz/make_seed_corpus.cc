// Writes service_fuzzer's seed corpus: a valid request of each type, as
// binary and as JSON, plain and aimed at the seeded studies (layout:
// tests/fuzz/fuzz_input.h).
//
//   make_seed_corpus DIR
//
// The corpus is checked in (tests/fuzz/corpus); rerun this after changing
// the layout or the API, then commit what it wrote.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "hypertune/v1/hypertune.pb.h"
#include "tests/fuzz/fuzz_input.h"

namespace hypertune::fuzz {
namespace {

namespace v1 = ::hypertune::v1;

struct Seed {
  std::string name;
  Rpc rpc;
  std::string text;  // The request in protobuf text format.
  const google::protobuf::Message* prototype;
};

constexpr char kParams[] = R"pb(
  parameters { name: "x" double_value: 0.25 }
  parameters { name: "lr" double_value: 0.01 }
  parameters { name: "n" int_value: 3 }
  parameters { name: "bs" double_value: 32 }
  parameters { name: "act" string_value: "tanh" }
)pb";

// A valid CreateStudyRequest whose spec has the early-stopping rule `rule`
// (text format of EarlyStoppingSpec).
std::string EarlyStoppingStudy(const std::string& rule) {
  return R"pb(
    study {
      name: "rules"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        early_stopping {)pb" +
         rule + "} } }";
}

// A CreateStudyRequest with boundary values in every numeric field.
constexpr char kBoundsStudy[] = R"pb(
  study {
    name: "bounds"
    spec {
      parameters { name: "x" double_spec { min: -1.7976931348623157e308 max: 1.7976931348623157e308 } }
      parameters { name: "n" integer_spec { min: -9223372036854775808 max: 9223372036854775807 } }
      metrics { name: "loss" goal: MINIMIZE }
      max_trials: 2147483647
      max_parallel_trials: -1
      lease_seconds: 2147483647
      max_retries: -1
      price_per_device_hour: inf
      max_device_hours: 9007199254740993
    }
  })pb";

std::vector<Seed> Seeds() {
  const std::string params = kParams;
  return {
      {"create_study", Rpc::kCreateStudy, R"pb(
        study {
          name: "new-study"
          spec {
            parameters { name: "x" double_spec { min: 0 max: 1 } }
            parameters { name: "lr" double_spec { min: 1e-5 max: 1 scale: LOG } }
            parameters { name: "n" integer_spec { min: 1 max: 64 scale: LOG } }
            parameters { name: "bs" discrete_spec { values: [ 8, 16, 32 ] } }
            parameters { name: "act" categorical_spec { values: [ "a", "b" ] } }
            metrics { name: "loss" goal: MINIMIZE }
            metrics { name: "acc" goal: MAXIMIZE }
            algorithm: GP_BANDIT
            max_trials: 10
            max_parallel_trials: 2
            seed: 3
            lease_seconds: 5
            max_retries: 1
          }
        })pb",
       &v1::CreateStudyRequest::default_instance()},
      {"get_study", Rpc::kGetStudy, R"pb(name: "s")pb",
       &v1::GetStudyRequest::default_instance()},
      {"list_studies", Rpc::kListStudies, "",
       &v1::ListStudiesRequest::default_instance()},
      {"delete_study", Rpc::kDeleteStudy, R"pb(name: "s")pb",
       &v1::DeleteStudyRequest::default_instance()},
      {"set_study_state", Rpc::kSetStudyState, R"pb(name: "s" state: PAUSED)pb",
       &v1::SetStudyStateRequest::default_instance()},
      {"suggest_trials", Rpc::kSuggestTrials,
       R"pb(study_name: "s" count: 2 client_id: "c9")pb",
       &v1::SuggestTrialsRequest::default_instance()},
      {"suggest_trials_held", Rpc::kSuggestTrials,
       R"pb(study_name: "s" count: 1 client_id: "c0")pb",
       &v1::SuggestTrialsRequest::default_instance()},
      {"create_trial", Rpc::kCreateTrial,
       "study_name: \"s\" trial {" + params + "}",
       &v1::CreateTrialRequest::default_instance()},
      {"create_trial_completed", Rpc::kCreateTrial,
       "study_name: \"s\" trial { state: COMPLETED " + params +
           " final_measurement { step: 3 metrics { key: \"loss\" value: "
           "0.125 } } }",
       &v1::CreateTrialRequest::default_instance()},
      {"get_trial", Rpc::kGetTrial, R"pb(study_name: "s" trial_id: 1)pb",
       &v1::GetTrialRequest::default_instance()},
      {"list_trials", Rpc::kListTrials,
       R"pb(study_name: "s" page_size: 2 page_token: "1" states: ACTIVE)pb",
       &v1::ListTrialsRequest::default_instance()},
      {"add_measurement", Rpc::kAddMeasurement, R"pb(
        study_name: "s" trial_id: 1 lease_epoch: 1
        measurement {
          step: 3 elapsed_seconds: 1.5
          metrics { key: "loss" value: 0.3 }
          metrics { key: "acc" value: 0.7 }
        })pb",
       &v1::AddMeasurementRequest::default_instance()},
      {"complete_trial", Rpc::kCompleteTrial, R"pb(
        study_name: "s" trial_id: 4 lease_epoch: 1
        final_measurement { step: 2 metrics { key: "loss" value: 0.1 } })pb",
       &v1::CompleteTrialRequest::default_instance()},
      {"complete_trial_infeasible", Rpc::kCompleteTrial, R"pb(
        study_name: "s" trial_id: 4 lease_epoch: 1
        infeasible: true infeasible_reason: "diverged")pb",
       &v1::CompleteTrialRequest::default_instance()},
      {"complete_trial_worker_failed", Rpc::kCompleteTrial, R"pb(
        study_name: "s" trial_id: 1 lease_epoch: 1
        worker_failed: true failure_reason: "preempted")pb",
       &v1::CompleteTrialRequest::default_instance()},
      {"list_optimal_trials", Rpc::kListOptimalTrials, R"pb(study_name: "s")pb",
       &v1::ListOptimalTrialsRequest::default_instance()},
      {"heartbeat", Rpc::kHeartbeat, R"pb(
        study_name: "s" trial_id: 4 lease_epoch: 1 client_id: "c3"
        checkpoint_uri: "file:///ckpt/4" log_path: "/tmp/4.log")pb",
       &v1::HeartbeatRequest::default_instance()},
      {"check_early_stopping", Rpc::kCheckEarlyStopping,
       R"pb(study_name: "s" trial_id: 4)pb",
       &v1::CheckEarlyStoppingRequest::default_instance()},
      {"stop_trial", Rpc::kStopTrial,
       R"pb(study_name: "s" trial_id: 4 reason: "by hand")pb",
       &v1::StopTrialRequest::default_instance()},
      {"set_study_owner", Rpc::kSetStudyOwner,
       R"pb(name: "s" owner: "alice")pb",
       &v1::SetStudyOwnerRequest::default_instance()},
      {"create_study_bounds", Rpc::kCreateStudy, kBoundsStudy,
       &v1::CreateStudyRequest::default_instance()},
      // Early-stopping specs of every rule, at and past their bounds (a
      // HYPERBAND max_resource near INT64_MAX once hung the server).
      {"create_study_hyperband_huge", Rpc::kCreateStudy,
       EarlyStoppingStudy("rule: HYPERBAND min_resource: 1 "
                          "max_resource: 9223372036854775807 "
                          "reduction_factor: 2 brackets: 2147483647"),
       &v1::CreateStudyRequest::default_instance()},
      {"create_study_hyperband_2_53", Rpc::kCreateStudy,
       EarlyStoppingStudy("rule: HYPERBAND min_resource: 1 "
                          "max_resource: 9007199254740992 "
                          "reduction_factor: 2"),
       &v1::CreateStudyRequest::default_instance()},
      {"create_study_asha_pause", Rpc::kCreateStudy,
       EarlyStoppingStudy("rule: ASHA min_resource: 1 max_resource: 27 "
                          "reduction_factor: 3 pause_at_rungs: true "
                          "min_trials: -1"),
       &v1::CreateStudyRequest::default_instance()},
      {"create_study_asha_huge_eta", Rpc::kCreateStudy,
       EarlyStoppingStudy("rule: ASHA min_resource: 4611686018427387904 "
                          "max_resource: 4611686018427387904 "
                          "reduction_factor: 1.7976931348623157e308"),
       &v1::CreateStudyRequest::default_instance()},
      {"create_study_median", Rpc::kCreateStudy,
       EarlyStoppingStudy("rule: MEDIAN grace_steps: -9223372036854775808 "
                          "min_trials: 2147483647"),
       &v1::CreateStudyRequest::default_instance()},
      {"create_study_percentile", Rpc::kCreateStudy,
       EarlyStoppingStudy("rule: PERCENTILE percentile: inf"),
       &v1::CreateStudyRequest::default_instance()},
  };
}

bool Write(const std::filesystem::path& path, uint8_t selector,
           const std::string& payload) {
  std::ofstream out(path, std::ios::binary);
  out.put(static_cast<char>(selector));
  out << payload;
  return static_cast<bool>(out);
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seed_corpus DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  int written = 0;
  for (const Seed& seed : Seeds()) {
    std::unique_ptr<google::protobuf::Message> request(seed.prototype->New());
    if (!google::protobuf::TextFormat::ParseFromString(seed.text,
                                                       request.get())) {
      std::cerr << "make_seed_corpus: seed " << seed.name
                << " does not parse\n";
      return 1;
    }
    std::string binary = request->SerializeAsString();
    std::string json;
    if (!google::protobuf::util::MessageToJsonString(*request, &json).ok()) {
      std::cerr << "make_seed_corpus: seed " << seed.name << " has no JSON\n";
      return 1;
    }
    const uint8_t rpc = static_cast<uint8_t>(seed.rpc);
    const struct {
      const char* suffix;
      uint8_t flags;
      const std::string& payload;
    } variants[] = {
        {"bin", 0, binary},
        {"bin-aim", kAim, binary},
        {"bin-aim-gp", kAim | kGpStudy, binary},
        {"bin-aim-expired", kAim | kLeasesRunOut, binary},
        {"json", kJson, json},
        {"json-aim-gp", kJson | kAim | kGpStudy, json},
    };
    for (const auto& v : variants) {
      if (!Write(dir / (seed.name + "-" + v.suffix), rpc | v.flags,
                 v.payload)) {
        std::cerr << "make_seed_corpus: cannot write to " << dir << "\n";
        return 1;
      }
      ++written;
    }
  }
  std::cout << "wrote " << written << " seeds to " << dir.string() << "\n";
  return 0;
}

}  // namespace
}  // namespace hypertune::fuzz

int main(int argc, char** argv) { return hypertune::fuzz::Main(argc, argv); }
