// libFuzzer target: arbitrary bytes as each request type of the API, fed to a
// StudyService over a MemoryStore that holds two seeded studies (RANDOM and
// GP_BANDIT) with trials in every state, so that fuzzed requests reach the
// paths behind the lookups. Input layout: tests/fuzz/fuzz_input.h.
//
// Differential: the same request also goes to a second StudyService over a
// SqliteStore (":memory:") seeded alike, on the same clock; both must give
// the same status code, the same response and leave the same trials, since
// the two stores promise one behavior (their shared typed test suite).
//
// Besides the sanitizers (address, undefined), each input is checked against
// what the service promises whatever it is sent:
//   - no INTERNAL, UNKNOWN or DATA_LOSS status, and no error without a
//     message (a bad request is the caller's fault and says what was wrong);
//   - every response converts to JSON (the CLI prints it);
//   - afterwards, and after expiring leases, every study's trials have dense
//     ids from 1 and a valid state, no stored metric is NaN, a trial that is
//     not FAILED has retry_count <= the study's max_retries, and a COMPLETED
//     trial carries its study's objective.
// A broken promise aborts with a message, so libFuzzer keeps the input.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/conversion.h"
#include "service/rpc/study_service.h"
#include "storage/memory_store.h"
#include "storage/open_store.h"
#include "tests/fuzz/fuzz_input.h"

namespace hypertune::fuzz {
namespace {

namespace v1 = ::hypertune::v1;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;

constexpr int64_t kStartMs = 1'700'000'000'000;
constexpr int kSeedMaxRetries = 1;

[[noreturn]] void Broken(const std::string& what) {
  std::fprintf(stderr, "service_fuzzer: promise broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

void Check(bool ok, const std::string& what) {
  if (!ok) Broken(what);
}

v1::Study SeedStudy(const char* name, v1::Algorithm algorithm) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    spec {
      parameters { name: "x" double_spec { min: -1 max: 1 } }
      parameters { name: "lr" double_spec { min: 1e-4 max: 1 scale: LOG } }
      parameters { name: "n" integer_spec { min: 1 max: 8 } }
      parameters { name: "bs" discrete_spec { values: [ 16, 32, 64 ] } }
      parameters { name: "act" categorical_spec { values: [ "relu", "tanh" ] } }
      metrics { name: "loss" goal: MINIMIZE }
      metrics { name: "acc" goal: MAXIMIZE }
      max_trials: 40
      max_parallel_trials: 12
      lease_seconds: 10
      seed: 7
    })pb",
                                                &study);
  study.set_name(name);
  study.mutable_spec()->set_algorithm(algorithm);
  study.mutable_spec()->set_max_retries(kSeedMaxRetries);
  return study;
}

// A service over `store` with the clock `*now_ms`, seeded with studies whose
// trials are: 1 ACTIVE with two measurements, 2 COMPLETED, 3 INFEASIBLE,
// 4 ACTIVE, 5 REQUESTED (enqueued), 6 COMPLETED (warm start). The GP_BANDIT
// study (slower to seed) only when `with_gp`.
class Side {
 public:
  Side(std::unique_ptr<storage::StudyStore> store, const int64_t* now_ms,
       bool with_gp)
      : store_(std::move(store)), service_(store_.get(), Options(now_ms)) {
    Seed(kRandomStudy, v1::RANDOM);
    if (with_gp) Seed(kGpStudyName, v1::GP_BANDIT);
  }

  service::StudyService& service() { return service_; }
  storage::StudyStore& store() { return *store_; }

  // Points `request` at the seeded study chosen by `selector`: its study
  // name, a trial id among its trials (or one past them), that trial's
  // current lease epoch when the given epoch is odd, a count of 1 to 8.
  void Aim(Message& request, uint8_t selector) {
    const std::string study =
        (selector & kGpStudy) ? kGpStudyName : kRandomStudy;
    const auto* descriptor = request.GetDescriptor();
    const auto* reflection = request.GetReflection();
    for (const char* field : {"study_name", "name"}) {
      if (const FieldDescriptor* f = descriptor->FindFieldByName(field);
          f != nullptr && f->type() == FieldDescriptor::TYPE_STRING) {
        reflection->SetString(&request, f, study);
      }
    }
    int64_t trial_id = 0;
    if (const FieldDescriptor* f = descriptor->FindFieldByName("trial_id")) {
      auto trials = store_->ListTrials(study, {});
      const int64_t n = trials.ok() ? static_cast<int64_t>(trials->size()) : 0;
      const uint64_t given =
          static_cast<uint64_t>(reflection->GetInt64(request, f));
      trial_id = 1 + static_cast<int64_t>(given % static_cast<uint64_t>(n + 1));
      reflection->SetInt64(&request, f, trial_id);
    }
    if (const FieldDescriptor* f = descriptor->FindFieldByName("lease_epoch");
        f != nullptr && trial_id > 0 &&
        (reflection->GetInt64(request, f) & 1)) {
      auto trial = store_->GetTrial(study, trial_id);
      if (trial.ok()) reflection->SetInt64(&request, f, trial->lease_epoch());
    }
    if (const FieldDescriptor* f = descriptor->FindFieldByName("count")) {
      const uint32_t given =
          static_cast<uint32_t>(reflection->GetInt32(request, f));
      reflection->SetInt32(&request, f, static_cast<int32_t>(1 + given % 8));
    }
  }

 private:
  static service::ServiceOptions Options(const int64_t* now_ms) {
    service::ServiceOptions options;
    options.now_ms = [now_ms] { return *now_ms; };
    return options;
  }

  void Seed(const char* name, v1::Algorithm algorithm) {
    v1::CreateStudyRequest create;
    *create.mutable_study() = SeedStudy(name, algorithm);
    Check(service_.CreateStudy(create).ok(), "seeding: CreateStudy");
    v1::Trial granted[4];
    for (int i = 0; i < 4; ++i) {
      v1::SuggestTrialsRequest suggest;
      suggest.set_study_name(name);
      suggest.set_count(1);
      suggest.set_client_id("c" + std::to_string(i));
      auto response = service_.SuggestTrials(suggest);
      Check(response.ok() && response->trials_size() == 1,
            "seeding: SuggestTrials");
      granted[i] = response->trials(0);
    }
    for (int step = 1; step <= 2; ++step) {
      v1::AddMeasurementRequest measure;
      measure.set_study_name(name);
      measure.set_trial_id(granted[0].id());
      measure.set_lease_epoch(granted[0].lease_epoch());
      measure.mutable_measurement()->set_step(step);
      (*measure.mutable_measurement()->mutable_metrics())["loss"] = 1.0 / step;
      Check(service_.AddMeasurement(measure).ok(), "seeding: AddMeasurement");
    }
    v1::CompleteTrialRequest complete;
    complete.set_study_name(name);
    complete.set_trial_id(granted[1].id());
    complete.set_lease_epoch(granted[1].lease_epoch());
    auto& metrics = *complete.mutable_final_measurement()->mutable_metrics();
    metrics["loss"] = 0.5;
    metrics["acc"] = 0.9;
    Check(service_.CompleteTrial(complete).ok(), "seeding: CompleteTrial");
    v1::CompleteTrialRequest infeasible;
    infeasible.set_study_name(name);
    infeasible.set_trial_id(granted[2].id());
    infeasible.set_lease_epoch(granted[2].lease_epoch());
    infeasible.set_infeasible(true);
    infeasible.set_infeasible_reason("out of memory");
    Check(service_.CompleteTrial(infeasible).ok(), "seeding: infeasible");
    for (bool completed : {false, true}) {
      v1::CreateTrialRequest enqueue;
      enqueue.set_study_name(name);
      *enqueue.mutable_trial()->mutable_parameters() = granted[3].parameters();
      if (completed) {
        enqueue.mutable_trial()->set_state(v1::Trial::COMPLETED);
        (*enqueue.mutable_trial()
              ->mutable_final_measurement()
              ->mutable_metrics())["loss"] = -0.25;
      }
      Check(service_.CreateTrial(enqueue).ok(), "seeding: CreateTrial");
    }
  }

  std::unique_ptr<storage::StudyStore> store_;
  service::StudyService service_;
};

std::unique_ptr<storage::StudyStore> OpenSqlite() {
  storage::StoreOptions options;
  options.path = ":memory:";
  auto store = storage::OpenStore(options);
  Check(store.ok(), "opening a SqliteStore on :memory:");
  return *std::move(store);
}

// The two sides on one clock that the input can move.
class Fixture {
 public:
  explicit Fixture(bool with_gp)
      : memory_(std::make_unique<storage::MemoryStore>(), &now_ms_, with_gp),
        sqlite_(OpenSqlite(), &now_ms_, with_gp) {}

  Side& memory() { return memory_; }
  Side& sqlite() { return sqlite_; }
  void RunLeasesOut() { now_ms_ += 24 * 3600 * 1000; }

 private:
  int64_t now_ms_ = kStartMs;
  Side memory_;
  Side sqlite_;
};

bool Parse(std::string_view payload, bool json, Message& request) {
  if (json) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = (payload.size() & 1) != 0;
    return google::protobuf::util::JsonStringToMessage(std::string(payload),
                                                       &request, options)
        .ok();
  }
  return request.ParseFromArray(payload.data(),
                                static_cast<int>(payload.size()));
}

void CheckStatus(const absl::Status& status, const char* rpc) {
  if (status.ok()) return;
  const std::string what = std::string(rpc) + " answered " + status.ToString();
  Check(status.code() != absl::StatusCode::kInternal &&
            status.code() != absl::StatusCode::kUnknown &&
            status.code() != absl::StatusCode::kDataLoss,
        what);
  Check(!status.message().empty(), what + " (no message)");
}

void CheckMeasurement(const v1::Measurement& m, const std::string& where) {
  for (const auto& [name, value] : m.metrics()) {
    Check(!std::isnan(value), where + ": NaN metric \"" + name + "\" stored");
  }
}

// The stored state keeps the promises listed at the top of this file, and
// the SQLite side holds the same studies and trials.
void CheckStores(Fixture& fixture) {
  auto studies = fixture.memory().store().ListStudies();
  Check(studies.ok(), "ListStudies on the store failed");
  auto sqlite_studies = fixture.sqlite().store().ListStudies();
  Check(sqlite_studies.ok() && sqlite_studies->size() == studies->size(),
        "the stores hold different numbers of studies");
  for (const v1::Study& study : *studies) {
    auto trials = fixture.memory().store().ListTrials(study.name(), {});
    Check(trials.ok(), "ListTrials on the store failed");
    auto sqlite_trials = fixture.sqlite().store().ListTrials(study.name(), {});
    Check(sqlite_trials.ok() && sqlite_trials->size() == trials->size(),
          "study \"" + study.name() + "\": the stores hold different trials");
    for (size_t i = 0; i < trials->size(); ++i) {
      Check(MessageDifferencer::Equals((*trials)[i], (*sqlite_trials)[i]),
            "study \"" + study.name() + "\": the stores differ on trial " +
                std::to_string(i + 1) + ":\n" + (*trials)[i].DebugString() +
                "vs\n" + (*sqlite_trials)[i].DebugString());
    }
    const int max_retries =
        study.spec().has_max_retries() ? study.spec().max_retries() : 2;
    int64_t expected_id = 1;
    for (const v1::Trial& t : *trials) {
      const std::string where =
          "study \"" + study.name() + "\" trial " + std::to_string(t.id());
      Check(t.id() == expected_id++, where + ": ids not dense from 1");
      Check(v1::Trial::State_IsValid(t.state()) &&
                t.state() != v1::Trial::STATE_UNSPECIFIED,
            where + ": invalid state");
      for (const v1::Measurement& m : t.measurements())
        CheckMeasurement(m, where);
      CheckMeasurement(t.final_measurement(), where);
      if (t.state() != v1::Trial::FAILED) {
        Check(t.retry_count() <= max_retries,
              where + ": retry_count " + std::to_string(t.retry_count()) +
                  " > max_retries " + std::to_string(max_retries));
      }
      if (t.state() == v1::Trial::COMPLETED) {
        Check(service::MaximizedObjective(study.spec(), t.final_measurement())
                  .has_value(),
              where + ": COMPLETED without its objective");
      }
    }
  }
}

template <typename Request, typename Response>
void Call(Fixture& fixture, std::string_view payload, uint8_t selector,
          const char* rpc,
          absl::StatusOr<Response> (service::StudyService::*method)(
              const Request&, const service::Principal&)) {
  Request request;
  if (!Parse(payload, (selector & kJson) != 0, request)) return;
  if (selector & kAim) fixture.memory().Aim(request, selector);
  const service::Principal caller = service::Principal::AuthOff();
  absl::StatusOr<Response> response =
      (fixture.memory().service().*method)(request, caller);
  absl::StatusOr<Response> sqlite_response =
      (fixture.sqlite().service().*method)(request, caller);
  CheckStatus(response.status(), rpc);
  Check(response.status().code() == sqlite_response.status().code(),
        std::string(rpc) + ": MemoryStore answered " +
            response.status().ToString() + ", SqliteStore " +
            sqlite_response.status().ToString());
  if (response.ok()) {
    Check(MessageDifferencer::Equals(*response, *sqlite_response),
          std::string(rpc) + ": the stores' responses differ:\n" +
              response->DebugString() + "vs\n" +
              sqlite_response->DebugString());
    std::string json;
    Check(google::protobuf::util::MessageToJsonString(*response, &json).ok(),
          std::string(rpc) + ": response does not convert to JSON");
  }
}

}  // namespace
}  // namespace hypertune::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every string that is not UTF-8; fuzzing makes thousands.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hypertune::fuzz;
  using hypertune::service::StudyService;
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string_view payload(reinterpret_cast<const char*>(data + 1),
                                 size - 1);
  Fixture fixture((selector & kAim) && (selector & kGpStudy));
  if (selector & kLeasesRunOut) fixture.RunLeasesOut();
  switch (static_cast<Rpc>((selector & kRpcMask) % kRpcCount)) {
    case Rpc::kCreateStudy:
      Call(fixture, payload, selector, "CreateStudy",
           &StudyService::CreateStudy);
      break;
    case Rpc::kGetStudy:
      Call(fixture, payload, selector, "GetStudy", &StudyService::GetStudy);
      break;
    case Rpc::kListStudies:
      Call(fixture, payload, selector, "ListStudies",
           &StudyService::ListStudies);
      break;
    case Rpc::kDeleteStudy:
      Call(fixture, payload, selector, "DeleteStudy",
           &StudyService::DeleteStudy);
      break;
    case Rpc::kSetStudyState:
      Call(fixture, payload, selector, "SetStudyState",
           &StudyService::SetStudyState);
      break;
    case Rpc::kSuggestTrials:
      Call(fixture, payload, selector, "SuggestTrials",
           &StudyService::SuggestTrials);
      break;
    case Rpc::kCreateTrial:
      Call(fixture, payload, selector, "CreateTrial",
           &StudyService::CreateTrial);
      break;
    case Rpc::kGetTrial:
      Call(fixture, payload, selector, "GetTrial", &StudyService::GetTrial);
      break;
    case Rpc::kListTrials:
      Call(fixture, payload, selector, "ListTrials", &StudyService::ListTrials);
      break;
    case Rpc::kAddMeasurement:
      Call(fixture, payload, selector, "AddMeasurement",
           &StudyService::AddMeasurement);
      break;
    case Rpc::kCompleteTrial:
      Call(fixture, payload, selector, "CompleteTrial",
           &StudyService::CompleteTrial);
      break;
    case Rpc::kListOptimalTrials:
      Call(fixture, payload, selector, "ListOptimalTrials",
           &StudyService::ListOptimalTrials);
      break;
    case Rpc::kHeartbeat:
      Call(fixture, payload, selector, "Heartbeat", &StudyService::Heartbeat);
      break;
    case Rpc::kCheckEarlyStopping:
      Call(fixture, payload, selector, "CheckEarlyStopping",
           &StudyService::CheckEarlyStopping);
      break;
    case Rpc::kStopTrial:
      Call(fixture, payload, selector, "StopTrial", &StudyService::StopTrial);
      break;
    case Rpc::kSetStudyOwner:
      Call(fixture, payload, selector, "SetStudyOwner",
           &StudyService::SetStudyOwner);
      break;
  }
  CheckStatus(fixture.memory().service().ExpireLeases(), "ExpireLeases");
  CheckStatus(fixture.sqlite().service().ExpireLeases(), "ExpireLeases");
  CheckStores(fixture);
  return 0;
}
