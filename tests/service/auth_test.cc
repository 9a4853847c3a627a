// Auth and TLS at hypertuned's edge: the token table on its own, then a real
// in-process server (loopback, temporary SQLite file) with two owners, and
// with TLS and mutual TLS whose certificates the test makes with the openssl
// command-line tool.
#include "service/server/auth.h"

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/grpc/grpc_service.h"
#include "service/rpc/study_service.h"
#include "service/server/server.h"
#include "storage/memory_store.h"
#include "testing/test_certs.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAliceToken[] = "tok-alice-6f1c2b0e9d";
constexpr char kBobToken[] = "tok-bob-31a7c44e02";

// A fresh directory under the system temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (fs::temp_directory_path() / "hypertune-auth-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const {
    return (path_ / name).string();
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(File(name)) << text;
    return File(name);
  }

 private:
  fs::path path_;
};

// ----- TokenTable and Authorizer -----

TEST(TokenTable, ParsesOwnersSkippingCommentsAndBlankLines) {
  auto table = service::TokenTable::Parse(
      "# team tokens\n\n  tok-a alice \n\ttok-b\tbob\r\ntok-c carol admin\n"
      "# end\n",
      "tokens");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  ASSERT_TRUE(table->HolderOf("tok-a").has_value());
  EXPECT_EQ(table->HolderOf("tok-a")->owner, "alice");
  EXPECT_TRUE(table->HolderOf("tok-a")->checked);
  EXPECT_FALSE(table->HolderOf("tok-a")->admin);
  EXPECT_EQ(table->HolderOf("tok-b")->owner, "bob");
  EXPECT_EQ(table->HolderOf("tok-c")->owner, "carol");
  EXPECT_TRUE(table->HolderOf("tok-c")->admin);
  EXPECT_TRUE(table->HasOwner("bob"));
  EXPECT_FALSE(table->HasOwner("mallory"));
  // Exact matches only: no prefix, extension, or other case.
  for (const char* other : {"tok-", "tok-a ", "tok-ab", "TOK-A", "", "bob"}) {
    EXPECT_FALSE(table->HolderOf(other).has_value()) << other;
  }
  EXPECT_FALSE(table->HolderOf(std::string(1000, 'x')).has_value());
}

TEST(TokenTable, AMalformedLineIsNamedByNumberWithoutItsToken) {
  auto table = service::TokenTable::Parse(
      "tok-a alice\n# comment\nsecret-token-xyz\n", "tokens.txt");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(table.status().message()),
              HasSubstr("tokens.txt line 3"));
  EXPECT_THAT(std::string(table.status().message()),
              Not(HasSubstr("secret-token-xyz")));

  auto three = service::TokenTable::Parse("tok-a alice extra\n", "f");
  EXPECT_THAT(std::string(three.status().message()), HasSubstr("f line 1"));
  EXPECT_THAT(std::string(three.status().message()), HasSubstr("admin"));
  EXPECT_THAT(std::string(three.status().message()), Not(HasSubstr("tok-a")));
  auto four = service::TokenTable::Parse("tok-a alice admin x\n", "f");
  EXPECT_THAT(std::string(four.status().message()), HasSubstr("f line 1"));
}

TEST(TokenTable, RefusesDuplicatesOverlongTokensAndEmptyTables) {
  auto twice = service::TokenTable::Parse("tok-a alice\ntok-a bob\n", "f");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("f line 2"));
  EXPECT_THAT(std::string(twice.status().message()), Not(HasSubstr("tok-a")));

  auto long_token = service::TokenTable::Parse(
      std::string(service::TokenTable::kMaxTokenBytes + 1, 't') + " alice",
      "f");
  EXPECT_EQ(long_token.status().code(), absl::StatusCode::kInvalidArgument);

  auto empty = service::TokenTable::Parse("# nothing yet\n\n", "f");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("no tokens"));

  EXPECT_EQ(service::TokenTable::Load("/surely/not/here").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(Authorizer, BearerTokensOnlyWhenEnabled) {
  service::Authorizer off;
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.Authenticate(std::nullopt)->checked);
  EXPECT_EQ(off.Authenticate(std::nullopt)->owner, "");
  EXPECT_TRUE(off.IsKnownOwner("anyone"));

  service::Authorizer on(*service::TokenTable::Parse("tok-a alice", "f"));
  EXPECT_EQ(on.Authenticate("Bearer tok-a")->owner, "alice");
  EXPECT_EQ(on.Authenticate("bearer tok-a")->owner, "alice");
  EXPECT_TRUE(on.Authenticate("bearer tok-a")->checked);
  for (const char* bad : {"Bearer tok-b", "tok-a", "Basic tok-a", "Bearer "}) {
    absl::StatusOr<service::Principal> who = on.Authenticate(bad);
    EXPECT_EQ(who.status().code(), absl::StatusCode::kUnauthenticated) << bad;
  }
  EXPECT_EQ(on.Authenticate(std::nullopt).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(on.IsKnownOwner("alice"));
  EXPECT_FALSE(on.IsKnownOwner("mallory"));
}

// The one access rule (access.h), for every kind of caller and study.
TEST(CheckAccess, OwnersAdminsAndStudiesWithoutOwner) {
  using service::Access;
  using service::CheckAccess;
  using service::Principal;
  v1::Study alices;
  alices.set_name("s");
  alices.set_owner("alice");
  v1::Study ownerless;
  ownerless.set_name("open");
  const Principal alice{"alice", /*checked=*/true, /*admin=*/false};
  const Principal bob{"bob", true, false};
  const Principal carol{"carol", true, /*admin=*/true};
  for (Access access : {Access::kRead, Access::kWrite}) {
    EXPECT_TRUE(CheckAccess(Principal::AuthOff(), alices, access).ok());
    EXPECT_TRUE(CheckAccess(alice, alices, access).ok());
    EXPECT_TRUE(CheckAccess(carol, alices, access).ok());
    EXPECT_TRUE(CheckAccess(carol, ownerless, access).ok());
    absl::Status denied = CheckAccess(bob, alices, access);
    EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(denied.message()), HasSubstr("\"s\""));
    EXPECT_THAT(std::string(denied.message()), Not(HasSubstr("alice")));
  }
  // Studies made while auth was off: everyone reads, only an admin writes.
  EXPECT_TRUE(CheckAccess(bob, ownerless, Access::kRead).ok());
  absl::Status write = CheckAccess(bob, ownerless, Access::kWrite);
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(write.message()), HasSubstr("only an admin"));
  EXPECT_THAT(std::string(write.message()), HasSubstr("chown"));
}

// ----- A real server with two owners -----

v1::Study SmallStudy(const std::string& name) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    spec {
      parameters { name: "x" double_spec { min: 0 max: 1 } }
      metrics { name: "loss" goal: MINIMIZE }
      algorithm: QUASI_RANDOM
    })pb",
                                                &study);
  study.set_name(name);
  return study;
}

std::unique_ptr<service::Server> StartServer(service::ServerOptions options) {
  options.listen = "127.0.0.1:0";
  auto server = service::Server::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions options;
    options.db_path = dir_.File("auth.db");
    options.auth_token_file =
        dir_.Write("tokens", absl::StrCat("# owners\n", kAliceToken,
                                          " alice\n\n", kBobToken, " bob\n"));
    server_ = StartServer(options);
    ASSERT_NE(server_, nullptr);
  }

  Client As(const std::string& token) const {
    ClientOptions options;
    options.server = server_->address();
    options.client_id = "c-" + token.substr(0, 7);
    options.token = token;
    options.max_attempts = 1;
    return Client(options);
  }

  TempDir dir_;
  std::unique_ptr<service::Server> server_;
};

TEST_F(AuthServerTest, NoTokenOrAnUnknownOneIsUnauthenticated) {
  for (const std::string& token : {std::string(), std::string("tok-guess")}) {
    Client client = As(token);
    absl::Status status = client.ListStudies().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << token;
    EXPECT_EQ(client.CreateStudy(SmallStudy("s")).status().code(),
              absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(client.GetStudy("s").status().code(),
              absl::StatusCode::kUnauthenticated);
    if (!token.empty()) {
      EXPECT_THAT(std::string(status.message()), Not(HasSubstr(token)));
    }
  }
}

TEST_F(AuthServerTest, OwnersTouchOnlyTheirOwnStudies) {
  Client alice = As(kAliceToken);
  Client bob = As(kBobToken);
  v1::Study claimed = SmallStudy("alices");
  claimed.set_owner("bob");  // Ignored: the caller owns what it creates.
  absl::StatusOr<v1::Study> created = alice.CreateStudy(claimed);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->owner(), "alice");
  auto held = alice.NextTrial("alices");
  ASSERT_TRUE(held.ok() && held->has_value()) << held.status();
  const v1::Trial trial = (*held)->proto();

  auto expect_denied = [](const absl::Status& status, const char* what) {
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << what;
    EXPECT_THAT(std::string(status.message()), HasSubstr("another owner"))
        << what;
  };
  expect_denied(bob.GetStudy("alices").status(), "GetStudy");
  expect_denied(bob.Suggest("alices", 1).status(), "SuggestTrials");
  expect_denied(bob.DeleteStudy("alices"), "DeleteStudy");
  expect_denied(bob.ListAllTrials("alices").status(), "ListTrials");
  expect_denied(bob.GetTrial("alices", trial.id()).status(), "GetTrial");
  expect_denied(bob.SetStudyState("alices", v1::Study::PAUSED).status(),
                "SetStudyState");
  v1::Trial queued;
  *queued.mutable_parameters() = trial.parameters();
  expect_denied(bob.CreateTrial("alices", queued).status(), "CreateTrial");
  expect_denied(bob.ListOptimalTrials("alices").status(), "ListOptimalTrials");
  v1::HeartbeatRequest beat;
  beat.set_study_name("alices");
  beat.set_trial_id(trial.id());
  beat.set_lease_epoch(trial.lease_epoch());
  expect_denied(bob.Heartbeat(beat).status(), "Heartbeat");
  v1::CompleteTrialRequest complete;
  complete.set_study_name("alices");
  complete.set_trial_id(trial.id());
  complete.set_lease_epoch(trial.lease_epoch());
  complete.set_infeasible(true);
  expect_denied(bob.CompleteTrial(complete).status(), "CompleteTrial");
  // A study that does not exist is NOT_FOUND for everyone.
  EXPECT_EQ(bob.GetStudy("nobodys").status().code(),
            absl::StatusCode::kNotFound);

  auto bobs_list = bob.ListStudies();
  ASSERT_TRUE(bobs_list.ok()) << bobs_list.status();
  EXPECT_TRUE(bobs_list->empty());
  ASSERT_TRUE(bob.CreateStudy(SmallStudy("bobs")).ok());
  auto alices_list = alice.ListStudies();
  ASSERT_TRUE(alices_list.ok());
  ASSERT_EQ(alices_list->size(), 1u);
  EXPECT_EQ((*alices_list)[0].name(), "alices");
  EXPECT_EQ((*alices_list)[0].owner(), "alice");

  // Alice's own calls go through, Bob's refusals changed nothing.
  ASSERT_TRUE((*held)->Report(1, {{"loss", 0.5}}).ok());
  ASSERT_TRUE((*held)->Complete({{"loss", 0.4}}).ok());
  auto study = alice.GetStudy("alices");
  ASSERT_TRUE(study.ok());
  EXPECT_EQ(study->state(), v1::Study::ACTIVE);
  EXPECT_EQ(study->trial_counts().at("COMPLETED"), 1);

  // Deleted, the name is free: whoever creates it next owns it.
  ASSERT_TRUE(alice.DeleteStudy("alices").ok());
  EXPECT_EQ(bob.GetStudy("alices").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(bob.CreateStudy(SmallStudy("alices")).ok());
  expect_denied(alice.GetStudy("alices").status(), "GetStudy after re-create");
  EXPECT_TRUE(bob.GetStudy("alices").ok());
}

TEST(AuthServer, WithoutAuthStudiesHaveNoOwner) {
  TempDir dir;
  service::ServerOptions options;
  options.db_path = dir.File("open.db");
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  ClientOptions client_options;
  client_options.server = server->address();
  client_options.token = "anything";  // Ignored by a server without auth.
  Client client(client_options);
  v1::Study claimed = SmallStudy("open");
  claimed.set_owner("mallory");
  auto created = client.CreateStudy(claimed);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->owner(), "");
  EXPECT_EQ(client.GetStudy("open")->owner(), "");
}

// Runs the hypertune CLI with `args`; returns its exit status, with its
// stdout and stderr in `out`.
int RunCli(const std::vector<std::string>& args, std::string* out) {
  std::string command = HYPERTUNE_CLI_PATH;
  for (const std::string& arg : args) {
    absl::StrAppend(&command, " ", test::ShellQuote(arg));
  }
  return test::RunShell(command, out);
}

// A study made while auth was off, on a server restarted with auth: every
// owner reads it, only the admin changes it, and the admin gives it an
// owner (SetStudyOwner, `hypertune study chown`).
TEST(AuthServer, StudiesWithoutOwnerAreReadByAllAndChangedByAnAdmin) {
  TempDir dir;
  service::ServerOptions options;
  options.db_path = dir.File("shared.db");
  {
    auto open = StartServer(options);
    ASSERT_NE(open, nullptr);
    ClientOptions client_options;
    client_options.server = open->address();
    Client anyone(client_options);
    ASSERT_TRUE(anyone.CreateStudy(SmallStudy("legacy")).ok());
    ASSERT_TRUE(anyone.Suggest("legacy", 1).ok());
  }
  options.auth_token_file =
      dir.Write("tokens", absl::StrCat(kAliceToken, " alice\n", kBobToken,
                                       " bob\ntok-carol-77 carol admin\n"));
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto as = [&](const std::string& token) {
    ClientOptions o;
    o.server = server->address();
    o.token = token;
    o.max_attempts = 1;
    o.heartbeats = false;
    return Client(o);
  };
  Client alice = as(kAliceToken);
  Client bob = as(kBobToken);
  Client carol = as("tok-carol-77");

  // Readable by everyone, listed for everyone.
  EXPECT_TRUE(alice.GetStudy("legacy").ok());
  EXPECT_TRUE(bob.ListAllTrials("legacy").ok());
  auto listed = bob.ListStudies();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  // Writable only by the admin.
  for (absl::Status status :
       {alice.Suggest("legacy", 1).status(), bob.DeleteStudy("legacy"),
        alice.SetStudyState("legacy", v1::Study::PAUSED).status(),
        bob.SetStudyOwner("legacy", "bob").status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("only an admin"));
  }
  EXPECT_TRUE(carol.Suggest("legacy", 1).ok());

  // The admin gives it to a known owner only.
  EXPECT_EQ(carol.SetStudyOwner("legacy", "mallory").status().code(),
            absl::StatusCode::kInvalidArgument);
  // By the CLI, as an admin would.
  std::string out;
  EXPECT_EQ(RunCli({"--server", server->address(), "--token", "tok-carol-77",
                    "study", "chown", "legacy", "alice"},
                   &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("study \"legacy\" belongs to \"alice\""));
  EXPECT_NE(RunCli({"--server", server->address(), "--token", kBobToken,
                    "study", "chown", "legacy", "bob"},
                   &out),
            0);
  EXPECT_THAT(out, HasSubstr("PERMISSION_DENIED"));
  auto given = carol.GetStudy("legacy");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->owner(), "alice");
  EXPECT_TRUE(alice.Suggest("legacy", 1).ok());
  EXPECT_EQ(bob.GetStudy("legacy").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(bob.ListStudies()->size(), 0u);
  // An owner may give its own study away, and then it is no longer theirs.
  ASSERT_TRUE(alice.SetStudyOwner("legacy", "bob").ok());
  EXPECT_TRUE(bob.GetStudy("legacy").ok());
  EXPECT_EQ(alice.GetStudy("legacy").status().code(),
            absl::StatusCode::kPermissionDenied);
  // The admin may act on every study.
  EXPECT_TRUE(carol.GetStudy("legacy").ok());
}

// A store whose GetStudy of `name` runs a hook right after reading, on the
// `fire_at`-th read after Arm: a window in which another call can create
// the study.
class HookedStore : public storage::MemoryStore {
 public:
  absl::StatusOr<v1::Study> GetStudy(std::string_view name) override {
    absl::StatusOr<v1::Study> study = MemoryStore::GetStudy(name);
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      if (hook_ && name == name_ && ++reads_ == fire_at_) hook = hook_;
    }
    if (hook) hook();
    return study;
  }
  void Arm(std::string name, int fire_at, std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    name_ = std::move(name);
    fire_at_ = fire_at;
    reads_ = 0;
    hook_ = std::move(hook);
  }

 private:
  absl::Mutex mu_;
  std::string name_ ABSL_GUARDED_BY(mu_);
  int fire_at_ ABSL_GUARDED_BY(mu_) = 0;
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
};

// The outside review's race: Bob calls on a study that does not exist yet
// while Alice creates it. Whatever read of Bob's call the creation lands
// after, Bob's call never acts on (or reads) Alice's study: the owner is
// checked on the row the call itself reads, under the study's lock.
TEST(OwnershipRace, ACallNeverActsOnAStudyCreatedWhileItRuns) {
  for (bool known_name : {false, true}) {
    for (int fire_at = 1; fire_at <= 4; ++fire_at) {
      SCOPED_TRACE(absl::StrCat(known_name ? "name used before" : "new name",
                                ", creation after read ", fire_at));
      TempDir dir;
      HookedStore store;
      service::StudyService study_service(&store, service::ServiceOptions());
      service::GrpcService grpc_service(
          &study_service,
          service::Authorizer(*service::TokenTable::Parse(
              absl::StrCat(kAliceToken, " alice\n", kBobToken, " bob\n"),
              "tokens")));
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &port);
      builder.RegisterService(&grpc_service);
      std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
      ASSERT_NE(server, nullptr);
      auto as = [&](const char* token) {
        ClientOptions o;
        o.server = absl::StrCat("127.0.0.1:", port);
        o.token = token;
        o.max_attempts = 1;
        o.heartbeats = false;
        return Client(o);
      };
      Client alice = as(kAliceToken);
      Client bob = as(kBobToken);
      if (known_name) {  // the server has seen the name before
        ASSERT_TRUE(alice.CreateStudy(SmallStudy("x")).ok());
        ASSERT_TRUE(alice.DeleteStudy("x").ok());
      }
      for (int call = 0; call < 3; ++call) {
        SCOPED_TRACE(absl::StrCat("call ", call));
        std::thread creator;
        absl::Notification created;
        store.Arm("x", fire_at, [&] {
          creator = std::thread([&] {
            EXPECT_TRUE(alice.CreateStudy(SmallStudy("x")).ok());
            created.Notify();
          });
          // Give the creation its chance to land inside Bob's call; if it
          // waits for the study's lock, Bob's call goes on without it.
          created.WaitForNotificationWithTimeout(absl::Milliseconds(200));
        });
        absl::Status status;
        v1::Trial trial;
        v1::ParameterValue* x = trial.add_parameters();
        x->set_name("x");
        x->set_double_value(0.5);
        switch (call) {
          case 0:
            status = bob.CreateTrial("x", trial).status();
            break;
          case 1:
            status = bob.Suggest("x", 1).status();
            break;
          case 2:
            status = bob.GetStudy("x").status();
            break;
        }
        store.Arm("", 0, nullptr);
        if (creator.joinable()) {
          creator.join();
        } else {  // the call ended before that read: create it after
          ASSERT_TRUE(alice.CreateStudy(SmallStudy("x")).ok());
        }
        EXPECT_TRUE(absl::IsNotFound(status) ||
                    absl::IsPermissionDenied(status))
            << status;
        auto trials = alice.ListAllTrials("x");
        ASSERT_TRUE(trials.ok()) << trials.status();
        EXPECT_TRUE(trials->empty());
        ASSERT_TRUE(alice.DeleteStudy("x").ok());
      }
      server->Shutdown();
    }
  }
}

TEST(AuthServer, AMalformedTokenFileStopsTheStartNamingTheLine) {
  TempDir dir;
  service::ServerOptions options;
  options.db_path = dir.File("never.db");
  options.listen = "127.0.0.1:0";
  options.auth_token_file =
      dir.Write("tokens", "tok-a alice\n\nlonely-secret-token\n");
  auto server = service::Server::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("line 3"));
  EXPECT_THAT(std::string(server.status().message()),
              Not(HasSubstr("lonely-secret-token")));
  EXPECT_FALSE(fs::exists(options.db_path));
}

// ----- TLS -----

// Certificates for a server at 127.0.0.1 and for clients, made by openssl.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::HaveOpenssl()) {
      GTEST_SKIP() << "the openssl command-line tool is not installed; the "
                      "TLS tests need it to make their certificates";
    }
    std::string log;
    ASSERT_TRUE(pki_.Make(&log)) << log;
  }

  std::unique_ptr<service::Server> StartTls(bool mutual) {
    service::ServerOptions options;
    options.db_path = dir_.File(mutual ? "mtls.db" : "tls.db");
    options.tls_cert_file = pki_.Pem("server");
    options.tls_key_file = pki_.Key("server");
    if (mutual) options.tls_client_ca_file = pki_.Pem("client-ca");
    return StartServer(options);
  }

  ClientOptions To(const service::Server& server) const {
    ClientOptions options;
    options.server = server.address();
    options.max_attempts = 1;
    options.call_timeout = std::chrono::seconds(10);
    return options;
  }

  TempDir dir_;
  test::TestPki pki_{dir_.File("")};
};

TEST_F(TlsTest, ClientsThatTrustTheCaTalkPlaintextOnesCannot) {
  auto server = StartTls(/*mutual=*/false);
  ASSERT_NE(server, nullptr);
  ClientOptions tls = To(*server);
  tls.tls_ca = pki_.Pem("ca");
  Client client(tls);
  auto created = client.CreateStudy(SmallStudy("over-tls"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(client.GetStudy("over-tls").ok());

  Client plaintext(To(*server));
  EXPECT_EQ(plaintext.GetStudy("over-tls").status().code(),
            absl::StatusCode::kUnavailable);

  // A CA that did not sign the server's certificate is not trusted.
  ClientOptions wrong_ca = To(*server);
  wrong_ca.tls_ca = pki_.Pem("client-ca");
  EXPECT_EQ(Client(wrong_ca).GetStudy("over-tls").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, MutualTlsNeedsACertificateFromTheClientCa) {
  auto server = StartTls(/*mutual=*/true);
  ASSERT_NE(server, nullptr);
  ClientOptions no_cert = To(*server);
  no_cert.tls_ca = pki_.Pem("ca");
  EXPECT_EQ(Client(no_cert).ListStudies().status().code(),
            absl::StatusCode::kUnavailable);

  ClientOptions stranger = no_cert;
  stranger.tls_cert = pki_.Pem("stranger");  // Signed by another CA.
  stranger.tls_key = pki_.Key("stranger");
  EXPECT_EQ(Client(stranger).ListStudies().status().code(),
            absl::StatusCode::kUnavailable);

  ClientOptions with_cert = no_cert;
  with_cert.tls_cert = pki_.Pem("client");
  with_cert.tls_key = pki_.Key("client");
  Client client(with_cert);
  auto created = client.CreateStudy(SmallStudy("mutual"));
  ASSERT_TRUE(created.ok()) << created.status();
  auto listed = client.ListStudies();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

TEST(TlsOptions, HalfAConfigurationIsRefusedAtStart) {
  TempDir dir;
  service::ServerOptions options;
  options.db_path = dir.File("x.db");
  options.listen = "127.0.0.1:0";
  options.tls_cert_file = dir.Write("cert.pem", "-----BEGIN CERTIFICATE-----");
  EXPECT_EQ(service::Server::Start(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.tls_cert_file.clear();
  options.tls_client_ca_file =
      dir.Write("ca.pem", "-----BEGIN CERTIFICATE-----");
  EXPECT_EQ(service::Server::Start(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.tls_client_ca_file.clear();
  options.tls_cert_file = dir.Write("not.pem", "hello");
  options.tls_key_file = dir.File("not.pem");
  absl::Status not_pem = service::Server::Start(options).status();
  EXPECT_EQ(not_pem.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(not_pem.message()), HasSubstr("not a PEM file"));
}

}  // namespace
}  // namespace hypertune
