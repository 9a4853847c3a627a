// The SDK's Client and Trial against an in-process fake of the service that
// can inject failures (UNAVAILABLE, lost replies) no real server would give
// on demand. The real server is covered by the service's integration tests.
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;

// Polls `done` until it holds or 10 s have passed; returns whether it held.
template <typename Condition>
bool Eventually(Condition done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Studies are not modelled: one study "s" whose SuggestTrials hands each
// client id its own trial, up to `budget` trials.
class FakeService final : public v1::HyperTune::Service {
 public:
  // The next `n` calls (any RPC) fail with `code` (UNAVAILABLE unless told)
  // before doing anything.
  void FailNext(int n, grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE) {
    absl::MutexLock lock(&mu_);
    fail_next_ = n;
    fail_code_ = code;
  }
  // The next call of `rpc` does its work, then replies UNAVAILABLE.
  void LoseReplyOf(const std::string& rpc) {
    absl::MutexLock lock(&mu_);
    lose_reply_of_ = rpc;
  }
  // Renewals wait until a CompleteTrial has done its work, and that
  // completion replies only after a renewal has: the race between a
  // trial's end and its background renewals, made certain.
  void RenewAfterTheNextCompletion() {
    absl::MutexLock lock(&mu_);
    renewal_waits_ = true;
  }
  void SetBudget(int budget) {
    absl::MutexLock lock(&mu_);
    budget_ = budget;
  }
  // SuggestTrials answers "none, still ACTIVE" this many times first.
  void SetBusyRounds(int rounds) {
    absl::MutexLock lock(&mu_);
    busy_rounds_ = rounds;
  }
  void AddTrial(v1::Trial trial) {
    absl::MutexLock lock(&mu_);
    trials_[trial.id()] = trial;
    next_id_ = std::max(next_id_, trial.id() + 1);
  }
  int Calls(const std::string& rpc) {
    absl::MutexLock lock(&mu_);
    return calls_[rpc];
  }
  std::vector<v1::AddMeasurementRequest> measurements() {
    absl::MutexLock lock(&mu_);
    return measurements_;
  }
  std::vector<v1::CompleteTrialRequest> completions() {
    absl::MutexLock lock(&mu_);
    return completions_;
  }
  std::vector<v1::HeartbeatRequest> heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  // The `authorization` metadata of the last call of `rpc`.
  std::string Authorization(const std::string& rpc) {
    absl::MutexLock lock(&mu_);
    return authorization_[rpc];
  }
  // Heartbeats answer should_stop with `stop`.
  void SetShouldStop(bool stop) {
    absl::MutexLock lock(&mu_);
    should_stop_ = stop;
  }
  // Trial `id` is paused at a rung (as ASHA's rule would).
  void Pause(int64_t id) {
    absl::MutexLock lock(&mu_);
    trials_[id].set_state(v1::Trial::PAUSED);
  }
  // Trial `id` is granted again to another worker: a new lease epoch.
  void TakeOver(int64_t id) {
    absl::MutexLock lock(&mu_);
    trials_[id].set_lease_epoch(trials_[id].lease_epoch() + 1);
  }

  grpc::Status GetStudy(grpc::ServerContext* context,
                        const v1::GetStudyRequest* request,
                        v1::Study* response) override {
    return Handle(context, "GetStudy", [&] {
      if (request->name() != "s") {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such study");
      }
      response->set_name("s");
      return grpc::Status::OK;
    });
  }

  grpc::Status CreateStudy(grpc::ServerContext* context,
                           const v1::CreateStudyRequest* request,
                           v1::Study* response) override {
    return Handle(context, "CreateStudy", [&] {
      if (created_) {
        return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "exists");
      }
      created_ = true;
      *response = request->study();
      return grpc::Status::OK;
    });
  }

  grpc::Status DeleteStudy(grpc::ServerContext* context,
                           const v1::DeleteStudyRequest*,
                           v1::DeleteStudyResponse*) override {
    return Handle(context, "DeleteStudy", [&] {
      if (deleted_) return grpc::Status(grpc::StatusCode::NOT_FOUND, "gone");
      deleted_ = true;
      return grpc::Status::OK;
    });
  }

  grpc::Status SuggestTrials(grpc::ServerContext* context,
                             const v1::SuggestTrialsRequest* request,
                             v1::SuggestTrialsResponse* response) override {
    return Handle(context, "SuggestTrials", [&] {
      response->set_study_state(v1::Study::ACTIVE);
      for (const auto& [id, trial] : trials_) {
        if (trial.state() == v1::Trial::ACTIVE &&
            trial.client_id() == request->client_id()) {
          *response->add_trials() = trial;
          return grpc::Status::OK;
        }
      }
      if (busy_rounds_ > 0) {
        --busy_rounds_;
        return grpc::Status::OK;
      }
      if (static_cast<int>(trials_.size()) >= budget_) {
        response->set_study_state(v1::Study::COMPLETED);
        return grpc::Status::OK;
      }
      v1::Trial& trial = trials_[next_id_];
      trial.set_study_name("s");
      trial.set_id(next_id_++);
      trial.set_state(v1::Trial::ACTIVE);
      trial.set_client_id(request->client_id());
      trial.set_lease_epoch(1);
      v1::ParameterValue* x = trial.add_parameters();
      x->set_name("x");
      x->set_double_value(0.5);
      *response->add_trials() = trial;
      return grpc::Status::OK;
    });
  }

  grpc::Status GetTrial(grpc::ServerContext* context,
                        const v1::GetTrialRequest* request,
                        v1::Trial* response) override {
    return Handle(context, "GetTrial", [&] {
      auto it = trials_.find(request->trial_id());
      if (it == trials_.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such trial");
      }
      *response = it->second;
      return grpc::Status::OK;
    });
  }

  grpc::Status ListTrials(grpc::ServerContext* context,
                          const v1::ListTrialsRequest* request,
                          v1::ListTrialsResponse* response) override {
    return Handle(context, "ListTrials", [&] {
      // Pages of two, whatever the page size asked.
      int64_t after =
          request->page_token().empty() ? 0 : std::stoll(request->page_token());
      for (auto it = trials_.upper_bound(after);
           it != trials_.end() && response->trials_size() < 2; ++it) {
        *response->add_trials() = it->second;
      }
      if (response->trials_size() == 2 &&
          trials_.upper_bound(response->trials(1).id()) != trials_.end()) {
        response->set_next_page_token(std::to_string(response->trials(1).id()));
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status AddMeasurement(grpc::ServerContext* context,
                              const v1::AddMeasurementRequest* request,
                              v1::Trial* response) override {
    return Handle(context, "AddMeasurement", [&] {
      measurements_.push_back(*request);
      v1::Trial& trial = trials_[request->trial_id()];
      *trial.add_measurements() = request->measurement();
      // As the server answers: the trial with only the measurement added.
      *response = trial;
      response->clear_measurements();
      *response->add_measurements() = request->measurement();
      return grpc::Status::OK;
    });
  }

  grpc::Status CompleteTrial(grpc::ServerContext* context,
                             const v1::CompleteTrialRequest* request,
                             v1::Trial* response) override {
    grpc::Status status = Complete(context, request, response);
    bool held;
    {
      absl::MutexLock lock(&mu_);
      held = renewal_waits_;
      completed_ = true;
      if (held) mu_.Await(absl::Condition(&renewal_replied_));
    }
    // Time for the renewal's reply to reach the client first.
    if (held) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return status;
  }

  grpc::Status Complete(grpc::ServerContext* context,
                        const v1::CompleteTrialRequest* request,
                        v1::Trial* response) {
    return Handle(context, "CompleteTrial", [&] {
      v1::Trial& trial = trials_[request->trial_id()];
      if (trial.state() == v1::Trial::PAUSED &&
          trial.lease_epoch() == request->lease_epoch()) {
        // As the server: the pause stands, its device time counts.
        completions_.push_back(*request);
        *response = trial;
        return grpc::Status::OK;
      }
      if (trial.state() != v1::Trial::ACTIVE) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "trial is not ACTIVE");
      }
      completions_.push_back(*request);
      if (request->worker_failed()) {
        trial.set_state(v1::Trial::REQUESTED);
        trial.set_failure_reason(request->failure_reason());
      } else {
        trial.set_state(request->infeasible() ? v1::Trial::INFEASIBLE
                                              : v1::Trial::COMPLETED);
        trial.set_infeasible_reason(request->infeasible_reason());
        *trial.mutable_final_measurement() = request->final_measurement();
      }
      *response = trial;
      return grpc::Status::OK;
    });
  }

  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    bool held;
    {
      absl::MutexLock lock(&mu_);
      held = renewal_waits_;
      if (held) mu_.Await(absl::Condition(&completed_));
    }
    grpc::Status status = Renew(context, request, response);
    if (held) {
      absl::MutexLock lock(&mu_);
      renewal_replied_ = true;
    }
    return status;
  }

  grpc::Status Renew(grpc::ServerContext* context,
                     const v1::HeartbeatRequest* request,
                     v1::HeartbeatResponse* response) {
    return Handle(context, "Heartbeat", [&] {
      heartbeats_.push_back(*request);
      auto it = trials_.find(request->trial_id());
      if (it == trials_.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such trial");
      }
      v1::Trial& trial = it->second;
      if (trial.state() != v1::Trial::ACTIVE ||
          trial.lease_epoch() != request->lease_epoch()) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "lease_epoch: a newer worker owns it");
      }
      if (!request->checkpoint_uri().empty()) {
        trial.set_checkpoint_uri(request->checkpoint_uri());
        trial.set_checkpoint_step(request->checkpoint_step());
      }
      response->set_should_stop(should_stop_);
      response->set_lease_expire_time_ms(1);
      return grpc::Status::OK;
    });
  }

 private:
  template <typename Work>
  grpc::Status Handle(grpc::ServerContext* context, const std::string& rpc,
                      Work work) {
    absl::MutexLock lock(&mu_);
    ++calls_[rpc];
    auto auth = context->client_metadata().find("authorization");
    authorization_[rpc] =
        auth == context->client_metadata().end()
            ? ""
            : std::string(auth->second.data(), auth->second.size());
    if (fail_next_ > 0) {
      --fail_next_;
      return grpc::Status(fail_code_, "injected");
    }
    grpc::Status status = work();
    if (lose_reply_of_ == rpc) {
      lose_reply_of_.clear();
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "reply lost");
    }
    return status;
  }

  absl::Mutex mu_;
  int fail_next_ = 0;
  grpc::StatusCode fail_code_ = grpc::StatusCode::UNAVAILABLE;
  std::string lose_reply_of_;
  int budget_ = 100;
  int busy_rounds_ = 0;
  bool created_ = false;
  bool deleted_ = false;
  int64_t next_id_ = 1;
  std::map<int64_t, v1::Trial> trials_;
  std::map<std::string, int> calls_;
  std::map<std::string, std::string> authorization_;
  bool should_stop_ = false;
  bool renewal_waits_ = false;
  bool completed_ = false;
  bool renewal_replied_ = false;
  std::vector<v1::HeartbeatRequest> heartbeats_;
  std::vector<v1::AddMeasurementRequest> measurements_;
  std::vector<v1::CompleteTrialRequest> completions_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(); }

  ClientOptions Options() {
    ClientOptions options;
    options.server = "127.0.0.1:" + std::to_string(port_);
    // Per test: the ids NextTrial holds are process-wide.
    options.client_id =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options.initial_backoff = std::chrono::milliseconds(1);
    options.max_backoff = std::chrono::milliseconds(2);
    return options;
  }

  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(ClientTest, RetriesUnavailable) {
  Client client(Options());
  service_.FailNext(2);
  absl::StatusOr<v1::Study> study = client.GetStudy("s");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(study->name(), "s");
  EXPECT_EQ(service_.Calls("GetStudy"), 3);
}

// Issue 46: a hypertuned stopped with SIGTERM cancels the calls it has not
// answered; a call safe to repeat rides through its restart.
TEST_F(ClientTest, RetriesACallTheServerCancelledWhenItIsSafeToRepeat) {
  Client client(Options());
  service_.FailNext(2, grpc::StatusCode::CANCELLED);
  absl::StatusOr<v1::Study> study = client.GetStudy("s");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(service_.Calls("GetStudy"), 3);
}

TEST_F(ClientTest, GivesUpAfterMaxAttemptsNamingTheServer) {
  ClientOptions options = Options();
  options.max_attempts = 3;
  Client client(options);
  service_.FailNext(100);
  absl::StatusOr<v1::Study> study = client.GetStudy("s");
  ASSERT_FALSE(study.ok());
  EXPECT_EQ(study.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(study.status().message()),
              HasSubstr("GetStudy to " + options.server +
                        " failed after 3 attempts: injected"));
  EXPECT_EQ(service_.Calls("GetStudy"), 3);
}

TEST_F(ClientTest, OtherErrorsAreReturnedAsTheyAre) {
  Client client(Options());
  absl::StatusOr<v1::Study> study = client.GetStudy("nope");
  EXPECT_EQ(study.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(study.status().message(), "no such study");
  EXPECT_EQ(service_.Calls("GetStudy"), 1);
}

TEST_F(ClientTest, NextTrialWaitsWhileTheStudyIsBusy) {
  Client client(Options());
  service_.SetBusyRounds(2);
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok()) << trial.status();
  ASSERT_TRUE(trial->has_value());
  EXPECT_EQ((*trial)->id(), 1);
  EXPECT_EQ(*(*trial)->Double("x"), 0.5);
  EXPECT_EQ(service_.Calls("SuggestTrials"), 3);
}

TEST_F(ClientTest, NextTrialIsNulloptWhenTheBudgetIsSpent) {
  Client client(Options());
  service_.SetBudget(0);
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok()) << trial.status();
  EXPECT_FALSE(trial->has_value());
}

TEST_F(ClientTest, UnfinishedTrialsGiveLaterCallersTheirOwnIds) {
  Client client(Options());
  Client same_id(Options());
  auto first = client.NextTrial("s");
  auto second = client.NextTrial("s");
  auto third = same_id.NextTrial("s");
  ASSERT_TRUE(first.ok() && second.ok() && third.ok());
  const std::string base = client.client_id();
  EXPECT_EQ((*first)->proto().client_id(), base);
  EXPECT_EQ((*second)->proto().client_id(), base + "-1");
  EXPECT_EQ((*third)->proto().client_id(), base + "-2");
  EXPECT_EQ((*first)->id(), 1);
  EXPECT_EQ((*second)->id(), 2);
  EXPECT_EQ((*third)->id(), 3);
  // Finishing the first frees its id for the next caller.
  ASSERT_TRUE((*first)->Complete({{"loss", 1.0}}).ok());
  auto fourth = client.NextTrial("s");
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ((*fourth)->proto().client_id(), base);
  EXPECT_EQ((*fourth)->id(), 4);
}

TEST_F(ClientTest, ReportAndCompleteCarryEpochStepAndMetrics) {
  Client client(Options());
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  Trial& t = **trial;
  ASSERT_TRUE(t.Report(1, {{"loss", 0.9}}).ok());
  ASSERT_TRUE(t.Report(2, {{"loss", 0.5}, {"acc", 0.7}}).ok());
  // Each answer holds its report alone; the handle keeps the whole curve.
  ASSERT_EQ(t.proto().measurements_size(), 2);
  EXPECT_EQ(t.proto().measurements(0).step(), 1);
  EXPECT_EQ(t.proto().measurements(0).metrics().at("loss"), 0.9);
  EXPECT_EQ(t.proto().measurements(1).step(), 2);
  EXPECT_EQ(t.proto().measurements(1).metrics().at("acc"), 0.7);
  ASSERT_TRUE(t.Complete({{"loss", 0.4}}).ok());
  std::vector<v1::AddMeasurementRequest> reports = service_.measurements();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].lease_epoch(), 1);
  EXPECT_EQ(reports[1].measurement().step(), 2);
  EXPECT_EQ(reports[1].measurement().metrics().at("acc"), 0.7);
  EXPECT_GE(reports[1].measurement().elapsed_seconds(),
            reports[0].measurement().elapsed_seconds());
  std::vector<v1::CompleteTrialRequest> done = service_.completions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].infeasible());
  EXPECT_EQ(done[0].final_measurement().step(), 2);
  EXPECT_EQ(done[0].final_measurement().metrics().at("loss"), 0.4);
  EXPECT_EQ(t.proto().state(), v1::Trial::COMPLETED);
}

TEST_F(ClientTest, NaNIsRefusedInReportsAndMakesCompletionInfeasible) {
  Client client(Options());
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  absl::Status report = (*trial)->Report(1, {{"loss", std::nan("")}});
  EXPECT_EQ(report.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(report.message()), HasSubstr("\"loss\" is NaN"));
  EXPECT_EQ(service_.Calls("AddMeasurement"), 0);
  EXPECT_EQ((*trial)->Report(1, {}).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE((*trial)->Complete({{"loss", std::nan("")}}).ok());
  std::vector<v1::CompleteTrialRequest> done = service_.completions();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].infeasible());
  EXPECT_EQ(done[0].infeasible_reason(), "metric \"loss\" is NaN");
}

TEST_F(ClientTest, LostCompletionReplyCountsAsSuccess) {
  Client client(Options());
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  service_.LoseReplyOf("CompleteTrial");
  absl::Status status = (*trial)->MarkInfeasible("diverged");
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(service_.Calls("CompleteTrial"), 2);
  EXPECT_EQ(service_.completions().size(), 1u);
  EXPECT_EQ((*trial)->proto().state(), v1::Trial::INFEASIBLE);
}

TEST_F(ClientTest, ACompletionRefusedOnTheFirstAttemptStaysAnError) {
  Client client(Options());
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  ASSERT_TRUE((*trial)->Complete({{"loss", 1.0}}).ok());
  absl::Status again = (*trial)->Complete({{"loss", 2.0}});
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ClientTest, LostCreateAndDeleteRepliesCountAsSuccess) {
  Client client(Options());
  v1::Study study;
  study.set_name("s");
  service_.LoseReplyOf("CreateStudy");
  absl::StatusOr<v1::Study> created = client.CreateStudy(study);
  EXPECT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(client.CreateStudy(study).status().code(),
            absl::StatusCode::kAlreadyExists);

  service_.LoseReplyOf("DeleteStudy");
  EXPECT_TRUE(client.DeleteStudy("s").ok());
  EXPECT_EQ(client.DeleteStudy("s").code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, ListAllTrialsPagesThroughEverything) {
  for (int64_t id = 1; id <= 5; ++id) {
    v1::Trial trial;
    trial.set_id(id);
    service_.AddTrial(trial);
  }
  Client client(Options());
  auto trials = client.ListAllTrials("s");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ((*trials)[i].id(), i + 1);
  EXPECT_EQ(service_.Calls("ListTrials"), 3);
}

// The only test that takes this process's worker trial (process-wide once).
TEST_F(ClientTest, UnderAWorkerNextTrialAttachesToItsTrialOnce) {
  v1::Trial held;
  held.set_study_name("s");
  held.set_id(42);
  held.set_state(v1::Trial::ACTIVE);
  held.set_lease_epoch(3);
  held.set_client_id("host-1-2");
  service_.AddTrial(held);
  setenv("HYPERTUNE_STUDY", "s", 1);
  setenv("HYPERTUNE_TRIAL_ID", "42", 1);
  setenv("HYPERTUNE_LEASE_EPOCH", "2", 1);
  Client client(Options());

  // Another study is not the worker's: asked for as usual.
  auto other = client.NextTrial("other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->id(), 42);

  auto first = client.NextTrial("s");
  auto second = client.NextTrial("s");
  unsetenv("HYPERTUNE_STUDY");
  unsetenv("HYPERTUNE_TRIAL_ID");
  unsetenv("HYPERTUNE_LEASE_EPOCH");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->id(), 42);
  // The worker's epoch, not the stored one: a newer holder would refuse us.
  EXPECT_EQ((*first)->lease_epoch(), 2);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->has_value());

  ASSERT_TRUE((*first)->Report(1, {{"loss", 0.3}}).ok());
  EXPECT_EQ(service_.measurements().back().lease_epoch(), 2);
  // The worker renews the lease, not the program.
  EXPECT_FALSE((*first)->heartbeating());
}

// Background renewals every few ms, so that tests see several quickly.
ClientOptions Fast(ClientOptions options) {
  options.heartbeat_interval = std::chrono::milliseconds(2);
  return options;
}

TEST_F(ClientTest, NextTrialRenewsItsLeaseUntilCompleted) {
  Client client(Fast(Options()));
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value()) << trial.status();
  Trial& t = **trial;
  EXPECT_TRUE(t.heartbeating());
  ASSERT_TRUE(Eventually([&] { return service_.Calls("Heartbeat") >= 3; }));
  v1::HeartbeatRequest beat = service_.heartbeats().back();
  EXPECT_EQ(beat.study_name(), "s");
  EXPECT_EQ(beat.trial_id(), t.id());
  EXPECT_EQ(beat.lease_epoch(), 1);
  EXPECT_EQ(beat.client_id(), client.client_id());
  EXPECT_EQ(beat.checkpoint_uri(), "");

  ASSERT_TRUE(t.Complete({{"loss", 0.5}}).ok());
  EXPECT_FALSE(t.heartbeating());
  EXPECT_TRUE(t.lease_status().ok());
}

// A renewal that reaches the server after the trial's completion is
// refused (the trial is no longer ACTIVE): the completion's own doing, not
// a lost lease.
// Renewals carry the device-seconds used since the lease was taken (wall
// seconds x devices), growing; the completion carries the total.
TEST_F(ClientTest, RenewalsAndTheCompletionCarryTheDeviceSeconds) {
  ClientOptions options = Fast(Options());
  options.devices = 2;
  Client client(options);
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value()) << trial.status();
  ASSERT_TRUE(Eventually([&] {
    std::vector<v1::HeartbeatRequest> beats = service_.heartbeats();
    return beats.size() >= 3 && beats.back().device_seconds() > 0;
  }));
  ASSERT_TRUE((*trial)->Complete({{"loss", 0.5}}).ok());
  std::vector<v1::HeartbeatRequest> beats = service_.heartbeats();
  for (size_t i = 1; i < beats.size(); ++i) {
    EXPECT_GE(beats[i].device_seconds(), beats[i - 1].device_seconds());
  }
  EXPECT_GE(service_.completions().back().device_seconds(),
            beats.back().device_seconds());
}

// Issue 46, item 5: a trial paused at a rung still tells the server the
// time it ran (before, Complete sent nothing).
TEST_F(ClientTest, CompletingAPausedTrialCountsItsDeviceTime) {
  Client client(Options());
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  Trial& t = **trial;
  service_.Pause(t.id());
  ASSERT_TRUE(t.Report(1, {{"loss", 0.9}}).ok());
  EXPECT_TRUE(t.paused());
  EXPECT_TRUE(t.should_stop());
  ASSERT_TRUE(t.Complete({{"loss", 0.9}}).ok());
  ASSERT_EQ(service_.completions().size(), 1u);
  const v1::CompleteTrialRequest done = service_.completions()[0];
  EXPECT_GT(done.device_seconds(), 0);
  EXPECT_FALSE(done.has_final_measurement());
  EXPECT_FALSE(done.infeasible());
  EXPECT_FALSE(t.heartbeating());
}

TEST_F(ClientTest, ARenewalRefusedAfterTheCompletionLosesNoLease) {
  Client client(Fast(Options()));
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value()) << trial.status();
  Trial& t = **trial;
  service_.RenewAfterTheNextCompletion();
  ASSERT_TRUE(t.Complete({{"loss", 0.5}}).ok());
  EXPECT_FALSE(t.heartbeating());
  EXPECT_TRUE(t.lease_status().ok()) << t.lease_status();
}

TEST_F(ClientTest, CopiesShareOneLease) {
  Client client(Fast(Options()));
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  Trial copy = **trial;
  EXPECT_TRUE(copy.heartbeating());
  ASSERT_TRUE((*trial)->MarkInfeasible("diverged").ok());
  // One renewal thread, stopped for every copy.
  EXPECT_FALSE(copy.heartbeating());
}

TEST_F(ClientTest, ShouldStopComesFromTheRenewals) {
  Client client(Fast(Options()));
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  EXPECT_FALSE((*trial)->should_stop());
  service_.SetShouldStop(true);
  EXPECT_TRUE(Eventually([&] { return (*trial)->should_stop(); }));
  // Asked to stop, the trial still reports and completes as usual.
  EXPECT_TRUE((*trial)->heartbeating());
  EXPECT_TRUE((*trial)->Complete({{"loss", 0.2}}).ok());
}

TEST_F(ClientTest, ALostLeaseStopsRenewalsAndLaterCalls) {
  Client client(Fast(Options()));
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  Trial& t = **trial;
  ASSERT_TRUE(t.Report(1, {{"loss", 0.9}}).ok());
  service_.TakeOver(t.id());
  ASSERT_TRUE(Eventually([&] { return !t.heartbeating(); }));
  EXPECT_EQ(t.lease_status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(t.lease_status().message()), HasSubstr("newer"));

  // Refused here, without asking the server.
  EXPECT_EQ(t.Report(2, {{"loss", 0.8}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.Complete({{"loss", 0.8}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.SetCheckpoint("file:///c").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_.measurements().size(), 1u);
  EXPECT_EQ(service_.Calls("CompleteTrial"), 0);
}

TEST_F(ClientTest, SetCheckpointRenewsTheLeaseCarryingIt) {
  ClientOptions options = Options();
  options.heartbeats = false;
  Client client(options);
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  Trial& t = **trial;
  EXPECT_FALSE(t.heartbeating());
  EXPECT_EQ(t.checkpoint_uri(), "");
  EXPECT_EQ(t.SetCheckpoint("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(service_.Calls("Heartbeat"), 0);

  ASSERT_TRUE(t.SetCheckpoint("file:///ckpt/trial-1/step-4", 4).ok());
  EXPECT_EQ(t.checkpoint_uri(), "file:///ckpt/trial-1/step-4");
  EXPECT_EQ(t.checkpoint_step(), 4);
  EXPECT_EQ(t.SetCheckpoint("file:///c", -1).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<v1::HeartbeatRequest> beats = service_.heartbeats();
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats[0].checkpoint_uri(), "file:///ckpt/trial-1/step-4");
  EXPECT_EQ(beats[0].checkpoint_step(), 4);
  EXPECT_EQ(beats[0].lease_epoch(), 1);
  auto stored = client.GetTrial("s", t.id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->checkpoint_uri(), "file:///ckpt/trial-1/step-4");
  EXPECT_EQ(stored->checkpoint_step(), 4);
}

TEST_F(ClientTest, AResumedTrialCarriesItsCheckpointAndMeasurements) {
  Client client(Options());
  v1::Trial resumed;
  resumed.set_study_name("s");
  resumed.set_id(7);
  resumed.set_state(v1::Trial::ACTIVE);
  resumed.set_client_id(client.client_id());
  resumed.set_lease_epoch(2);
  resumed.set_retry_count(1);
  resumed.set_checkpoint_uri("s3://ckpt/7");
  v1::Measurement* m = resumed.add_measurements();
  m->set_step(3);
  (*m->mutable_metrics())["loss"] = 0.6;
  service_.AddTrial(resumed);

  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  Trial& t = **trial;
  EXPECT_EQ(t.id(), 7);
  EXPECT_EQ(t.lease_epoch(), 2);
  EXPECT_EQ(t.checkpoint_uri(), "s3://ckpt/7");
  ASSERT_EQ(t.proto().measurements_size(), 1);
  ASSERT_TRUE(t.Complete({{"loss", 0.4}}).ok());
  // The final measurement continues from the resumed step.
  EXPECT_EQ(service_.completions().back().final_measurement().step(), 3);
  EXPECT_EQ(service_.completions().back().lease_epoch(), 2);
}

TEST_F(ClientTest, GiveBackReportsTheWorkersFailure) {
  Client client(Fast(Options()));
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  ASSERT_TRUE((*trial)->GiveBack("worker preempted").ok());
  EXPECT_FALSE((*trial)->heartbeating());
  v1::CompleteTrialRequest done = service_.completions().back();
  EXPECT_TRUE(done.worker_failed());
  EXPECT_FALSE(done.infeasible());
  EXPECT_EQ(done.failure_reason(), "worker preempted");
  EXPECT_EQ((*trial)->proto().state(), v1::Trial::REQUESTED);
  // Its id is free again: the next caller gets it.
  auto next = client.NextTrial("s");
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->proto().client_id(), client.client_id());
}

TEST_F(ClientTest, TheTokenGoesWithEveryCall) {
  ClientOptions options = Fast(Options());
  options.token = "s3cret-token";
  Client client(options);
  ASSERT_TRUE(client.GetStudy("s").ok());
  EXPECT_EQ(service_.Authorization("GetStudy"), "Bearer s3cret-token");
  auto trial = client.NextTrial("s");
  ASSERT_TRUE(trial.ok() && trial->has_value());
  ASSERT_TRUE(Eventually([&] { return service_.Calls("Heartbeat") >= 1; }));
  EXPECT_EQ(service_.Authorization("Heartbeat"), "Bearer s3cret-token");
  ASSERT_TRUE((*trial)->Complete({{"loss", 1.0}}).ok());
  EXPECT_EQ(service_.Authorization("CompleteTrial"), "Bearer s3cret-token");

  Client anonymous(Options());
  ASSERT_TRUE(anonymous.GetStudy("s").ok());
  EXPECT_EQ(service_.Authorization("GetStudy"), "");
}

}  // namespace
}  // namespace hypertune
