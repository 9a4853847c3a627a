// Unit tests of the SDK's pure parts: typed parameter access, option
// resolution, status conversion, backoff and the NextTrial client ids.
#include <cstdlib>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_sdk/client_core.h"
#include "trainer_sdk/grpc_status.h"
#include "trainer_sdk/hypertune.h"
#include "trainer_sdk/lease_keeper.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;

v1::Trial TrialProto() {
  v1::Trial trial;
  trial.set_study_name("s");
  trial.set_id(7);
  trial.set_lease_epoch(3);
  auto add = [&](const char* name) {
    v1::ParameterValue* p = trial.add_parameters();
    p->set_name(name);
    return p;
  };
  add("lr")->set_double_value(0.003);
  add("layers")->set_int_value(4);
  add("batch_size")->set_double_value(64.0);
  add("optimizer")->set_string_value("adam");
  add("empty");
  return trial;
}

TEST(Trial, AccessorsReflectTheProto) {
  Trial trial(TrialProto());
  EXPECT_EQ(trial.id(), 7);
  EXPECT_EQ(trial.study(), "s");
  EXPECT_EQ(trial.lease_epoch(), 3);
  EXPECT_EQ(trial.parameters().size(), 5);
  EXPECT_EQ(trial.proto().parameters(3).string_value(), "adam");
}

TEST(Trial, DoubleTakesDoublesDiscretesAndWidenedIntegers) {
  Trial trial(TrialProto());
  EXPECT_EQ(*trial.Double("lr"), 0.003);
  EXPECT_EQ(*trial.Double("batch_size"), 64.0);
  EXPECT_EQ(*trial.Double("layers"), 4.0);
  auto category = trial.Double("optimizer");
  ASSERT_FALSE(category.ok());
  EXPECT_EQ(category.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(category.status().message(),
            "trial 7: parameter \"optimizer\" is the category \"adam\", not a "
            "number");
}

TEST(Trial, IntTakesIntegersAndWholeDiscretes) {
  Trial trial(TrialProto());
  EXPECT_EQ(*trial.Int("layers"), 4);
  EXPECT_EQ(*trial.Int("batch_size"), 64);
  auto fraction = trial.Int("lr");
  ASSERT_FALSE(fraction.ok());
  EXPECT_EQ(fraction.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fraction.status().message(),
            "trial 7: parameter \"lr\" is the number 0.003, not an integer");
  EXPECT_FALSE(trial.Int("optimizer").ok());
}

TEST(Trial, IntRefusesDoublesOutsideInt64) {
  v1::Trial proto;
  v1::ParameterValue* p = proto.add_parameters();
  p->set_name("huge");
  p->set_double_value(1e19);
  EXPECT_EQ(Trial(proto).Int("huge").status().code(),
            absl::StatusCode::kInvalidArgument);
  p->set_double_value(-9223372036854775808.0);
  EXPECT_EQ(*Trial(proto).Int("huge"), std::numeric_limits<int64_t>::min());
}

TEST(Trial, StringTakesCategoriesOnly) {
  Trial trial(TrialProto());
  EXPECT_EQ(*trial.String("optimizer"), "adam");
  auto number = trial.String("layers");
  ASSERT_FALSE(number.ok());
  EXPECT_EQ(number.status().message(),
            "trial 7: parameter \"layers\" is the integer 4, not a category");
}

TEST(Trial, UnknownAndUnsetParameters) {
  Trial trial(TrialProto());
  auto missing = trial.Double("momentum");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "trial 7 has no parameter \"momentum\" (it has: lr, layers, "
            "batch_size, optimizer, empty)");
  auto unset = trial.Int("empty");
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unset.status().message()), HasSubstr("has no value"));
}

TEST(Trial, DetachedHandleRefusesServerCalls) {
  Trial trial(TrialProto());
  for (const absl::Status& s :
       {trial.Report(1, {{"loss", 1.0}}), trial.Complete({{"loss", 1.0}}),
        trial.MarkInfeasible("x"), trial.Heartbeat().status(),
        trial.GiveBack("x"), trial.SetCheckpoint("file:///c"),
        trial.lease_status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()), HasSubstr("detached"));
  }
  EXPECT_FALSE(trial.should_stop());
  EXPECT_FALSE(trial.heartbeating());
}

TEST(Trial, CheckpointUriIsTheStoredOne) {
  v1::Trial proto = TrialProto();
  EXPECT_EQ(Trial(proto).checkpoint_uri(), "");
  proto.set_checkpoint_uri("s3://bucket/trial-7/epoch-3");
  EXPECT_EQ(Trial(proto).checkpoint_uri(), "s3://bucket/trial-7/epoch-3");
}

TEST(Trial, AttemptAndCheckpointStepAreTheStoredOnes) {
  v1::Trial proto = TrialProto();
  // A server that predates attempts: the first.
  EXPECT_EQ(Trial(proto).attempt(), 1);
  EXPECT_EQ(Trial(proto).checkpoint_step(), 0);
  proto.set_attempt(3);
  proto.set_checkpoint_uri("s3://bucket/trial-7/epoch-3");
  proto.set_checkpoint_step(3);
  EXPECT_EQ(Trial(proto).attempt(), 3);
  EXPECT_EQ(Trial(proto).checkpoint_step(), 3);
  EXPECT_TRUE(Trial(proto).reports());
}

TEST(ProcessRank, RankThenLocalRankThenZero) {
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
  EXPECT_EQ(internal::ProcessRank(), 0);
  setenv("LOCAL_RANK", "2", 1);
  EXPECT_EQ(internal::ProcessRank(), 2);
  setenv("RANK", "5", 1);
  EXPECT_EQ(internal::ProcessRank(), 5);
  setenv("RANK", "not-a-number", 1);
  EXPECT_EQ(internal::ProcessRank(), 2);
  unsetenv("RANK");
  unsetenv("LOCAL_RANK");
}

TEST(RenewalInterval, AThirdOfWhatIsLeftOfTheLease) {
  using std::chrono::milliseconds;
  constexpr int64_t kNow = 1'700'000'000'000;
  EXPECT_EQ(internal::RenewalInterval(kNow + 30'000, kNow),
            milliseconds(10000));
  EXPECT_EQ(internal::RenewalInterval(kNow + 1'000, kNow), milliseconds(333));
  // Run out on our clock (or clocks far apart): renewed soon, not never.
  EXPECT_EQ(internal::RenewalInterval(kNow, kNow),
            internal::kMinRenewalInterval);
  EXPECT_EQ(internal::RenewalInterval(kNow - 5'000, kNow),
            internal::kMinRenewalInterval);
}

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"HYPERTUNE_SERVER", "HYPERTUNE_CLIENT_ID", "HYPERTUNE_TOKEN",
          "HYPERTUNE_TLS_CA", "HYPERTUNE_TLS_CERT", "HYPERTUNE_TLS_KEY"}) {
      const char* value = std::getenv(name);
      saved_.emplace_back(
          name, value ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(EnvTest, ServerFromOptionsThenEnvThenDefault) {
  EXPECT_EQ(ResolveClientOptions({}).server, "127.0.0.1:50051");
  setenv("HYPERTUNE_SERVER", "tuner:7000", 1);
  EXPECT_EQ(ResolveClientOptions({}).server, "tuner:7000");
  ClientOptions given;
  given.server = "explicit:1";
  EXPECT_EQ(ResolveClientOptions(given).server, "explicit:1");
  setenv("HYPERTUNE_SERVER", "", 1);
  EXPECT_EQ(ResolveClientOptions({}).server, "127.0.0.1:50051");
}

TEST(WithDefaultPortTest, AHostWithoutAPortMeans50051) {
  EXPECT_EQ(WithDefaultPort("localhost"), "localhost:50051");
  EXPECT_EQ(WithDefaultPort("gpu-box.lan"), "gpu-box.lan:50051");
  EXPECT_EQ(WithDefaultPort("10.0.0.7"), "10.0.0.7:50051");
  EXPECT_EQ(WithDefaultPort("[::1]"), "[::1]:50051");
  EXPECT_EQ(WithDefaultPort("localhost:7000"), "localhost:7000");
  EXPECT_EQ(WithDefaultPort("[::1]:7000"), "[::1]:7000");
  EXPECT_EQ(WithDefaultPort("::1"), "::1");
  EXPECT_EQ(WithDefaultPort("unix:/run/hypertune.sock"),
            "unix:/run/hypertune.sock");
  EXPECT_EQ(WithDefaultPort("dns:///tuner"), "dns:///tuner");
}

TEST_F(EnvTest, AServerWithoutAPortGetsTheDefaultPort) {
  ClientOptions given;
  given.server = "localhost";
  EXPECT_EQ(ResolveClientOptions(given).server, "localhost:50051");
  setenv("HYPERTUNE_SERVER", "tuner", 1);
  EXPECT_EQ(ResolveClientOptions({}).server, "tuner:50051");
}

TEST(UnreachableServerTest, TheErrorNamesTheAddressAndHypertuned) {
  ClientOptions options;
  options.server = "127.0.0.1:1";  // nothing listens on port 1
  options.max_attempts = 2;
  options.initial_backoff = std::chrono::milliseconds(1);
  options.max_backoff = std::chrono::milliseconds(1);
  options.call_timeout = std::chrono::seconds(2);
  Client client(options);
  absl::StatusOr<v1::Study> study = client.GetStudy("any");
  ASSERT_FALSE(study.ok());
  EXPECT_EQ(study.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(study.status().message()),
              ::testing::HasSubstr("is hypertuned running at 127.0.0.1:1?"));
}

TEST_F(EnvTest, ClientIdFromOptionsThenEnvThenHostAndPid) {
  std::string fallback = ResolveClientOptions({}).client_id;
  EXPECT_THAT(fallback, ::testing::EndsWith("-" + std::to_string(getpid())));
  EXPECT_GT(fallback.size(), std::to_string(getpid()).size() + 1);
  setenv("HYPERTUNE_CLIENT_ID", "worker-7", 1);
  EXPECT_EQ(ResolveClientOptions({}).client_id, "worker-7");
  ClientOptions given;
  given.client_id = "mine";
  EXPECT_EQ(ResolveClientOptions(given).client_id, "mine");
  EXPECT_EQ(Client(given).client_id(), "mine");
}

TEST_F(EnvTest, TokenAndTlsFilesFromOptionsThenEnv) {
  ClientOptions resolved = ResolveClientOptions({});
  EXPECT_EQ(resolved.token, "");
  EXPECT_EQ(resolved.tls_ca, "");
  setenv("HYPERTUNE_TOKEN", "env-token", 1);
  setenv("HYPERTUNE_TLS_CA", "/etc/ca.pem", 1);
  setenv("HYPERTUNE_TLS_CERT", "/etc/me.pem", 1);
  setenv("HYPERTUNE_TLS_KEY", "/etc/me.key", 1);
  resolved = ResolveClientOptions({});
  EXPECT_EQ(resolved.token, "env-token");
  EXPECT_EQ(resolved.tls_ca, "/etc/ca.pem");
  EXPECT_EQ(resolved.tls_cert, "/etc/me.pem");
  EXPECT_EQ(resolved.tls_key, "/etc/me.key");
  ClientOptions given;
  given.token = "flag-token";
  given.tls_ca = "/mine/ca.pem";
  resolved = ResolveClientOptions(given);
  EXPECT_EQ(resolved.token, "flag-token");
  EXPECT_EQ(resolved.tls_ca, "/mine/ca.pem");
}

TEST_F(EnvTest, UnreadableTlsFilesFailEveryCallNamingTheFile) {
  ClientOptions options;
  options.server = "127.0.0.1:1";
  options.tls_ca = "/surely/not/here/ca.pem";
  Client client(options);
  absl::Status status = client.GetStudy("s").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tls_ca: cannot read \"/surely/not/here/ca.pem\""));

  ClientOptions cert_without_tls;
  cert_without_tls.server = "127.0.0.1:1";
  cert_without_tls.tls_cert = "/some/cert.pem";
  cert_without_tls.tls_key = "/some/key.pem";
  EXPECT_EQ(Client(cert_without_tls).ListStudies().status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EnvTest, MaxAttemptsAtLeastOne) {
  ClientOptions options;
  options.max_attempts = 0;
  EXPECT_EQ(ResolveClientOptions(options).max_attempts, 1);
}

TEST(ToAbslStatus, KeepsCodeAndMessage) {
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
  absl::Status s = ToAbslStatus(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "stale");
  EXPECT_EQ(
      ToAbslStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "x")).code(),
      absl::StatusCode::kUnavailable);
}

TEST(BackoffDelay, DoublesUpToTheCapWithJitter) {
  using std::chrono::milliseconds;
  milliseconds initial(100), max(5000);
  EXPECT_EQ(BackoffDelay(1, initial, max, 1.0), milliseconds(100));
  EXPECT_EQ(BackoffDelay(2, initial, max, 1.0), milliseconds(200));
  EXPECT_EQ(BackoffDelay(6, initial, max, 1.0), milliseconds(3200));
  EXPECT_EQ(BackoffDelay(7, initial, max, 1.0), milliseconds(5000));
  EXPECT_EQ(BackoffDelay(60, initial, max, 1.0), milliseconds(5000));
  EXPECT_EQ(BackoffDelay(2, initial, max, 0.5), milliseconds(100));
}

TEST(ClientIdSlots, LowestFreeIdAndReuseAfterRelease) {
  const std::string base = "slots-test-host-1";
  auto a = internal::AcquireClientIdSlot(base);
  auto b = internal::AcquireClientIdSlot(base);
  auto c = internal::AcquireClientIdSlot(base);
  EXPECT_EQ(a->client_id(), base);
  EXPECT_EQ(b->client_id(), base + "-1");
  EXPECT_EQ(c->client_id(), base + "-2");
  b->Release();
  b->Release();  // Idempotent: must not free the id twice.
  auto d = internal::AcquireClientIdSlot(base);
  EXPECT_EQ(d->client_id(), base + "-1");
  auto e = internal::AcquireClientIdSlot(base);
  EXPECT_EQ(e->client_id(), base + "-3");
  // Another base has its own ids.
  EXPECT_EQ(internal::AcquireClientIdSlot("other-base")->client_id(),
            "other-base");
}

TEST(ClientIdSlots, DroppedWithoutReleaseStaysBusy) {
  const std::string base = "slots-test-host-2";
  internal::AcquireClientIdSlot(base);  // Dropped: its trial was abandoned.
  EXPECT_EQ(internal::AcquireClientIdSlot(base)->client_id(), base + "-1");
}

}  // namespace
}  // namespace hypertune
