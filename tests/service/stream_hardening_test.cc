// Streams that a client abandons or multiplies, over a real server: an
// ImportStudy cancelled mid-stream stores nothing, and WatchTrials streams
// are capped per owner and hold no thread while idle.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/server/server.h"
#include "testing/test_server.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;

class StreamHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override { Restart(Options()); }

  service::ServerOptions Options() const {
    service::ServerOptions options;
    options.db_path = dir_.File("streams.db");
    options.listen = "127.0.0.1:0";
    return options;
  }

  void Restart(const service::ServerOptions& options) {
    stub_.reset();
    server_.reset();
    auto server = service::Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::HyperTune::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }

  // An ImportStudy stream that sent its study and a first message of
  // trials, then stalls (no WritesDone), as `token`'s owner (empty: none).
  struct Stalled {
    grpc::ClientContext context;
    v1::Study response;
    std::unique_ptr<grpc::ClientWriter<v1::ImportStudyRequest>> writer;
  };
  std::unique_ptr<Stalled> Stall(const std::string& name,
                                 const std::string& token = "") {
    auto stalled = std::make_unique<Stalled>();
    if (!token.empty()) {
      stalled->context.AddMetadata("authorization", "Bearer " + token);
    }
    stalled->context.set_deadline(std::chrono::system_clock::now() +
                                  std::chrono::seconds(60));
    stalled->writer = stub_->ImportStudy(&stalled->context, &stalled->response);
    // A write fails once the server has answered (refused it).
    for (const v1::ImportStudyRequest& m : ImportMessages(name, 50)) {
      if (!stalled->writer->Write(m)) break;
    }
    return stalled;
  }

  // A whole import of `n` trials as `token`'s owner (empty: none).
  grpc::Status Import(const std::string& name, int n,
                      const std::string& token = "") {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::Study response;
    auto writer = stub_->ImportStudy(&context, &response);
    for (const v1::ImportStudyRequest& m : ImportMessages(name, n)) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static v1::Study Study(const std::string& name) {
    v1::Study study;
    google::protobuf::TextFormat::ParseFromString(R"pb(
      state: ACTIVE
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        algorithm: QUASI_RANDOM
      })pb",
                                                  &study);
    study.set_name(name);
    return study;
  }

  // The ImportStudy messages of study `name` with `n` COMPLETED trials, 50
  // to a message.
  static std::vector<v1::ImportStudyRequest> ImportMessages(
      const std::string& name, int n) {
    std::vector<v1::ImportStudyRequest> messages(1);
    *messages[0].mutable_study() = Study(name);
    for (int id = 1; id <= n; ++id) {
      if ((id - 1) % 50 == 0) messages.emplace_back();
      v1::Trial* t = messages.back().add_trials();
      t->set_id(id);
      t->set_state(v1::Trial::COMPLETED);
      v1::ParameterValue* x = t->add_parameters();
      x->set_name("x");
      x->set_double_value(id / (n + 1.0));
      (*t->mutable_final_measurement()->mutable_metrics())["loss"] = id;
    }
    return messages;
  }

  // Creates study `name` and suggests `n` trials (each a trial write).
  void CreateAndSuggest(const std::string& name, int n) {
    grpc::ClientContext context;
    v1::CreateStudyRequest create;
    *create.mutable_study() = Study(name);
    v1::Study created;
    ASSERT_TRUE(stub_->CreateStudy(&context, create, &created).ok());
    Suggest(name, n);
  }
  void Suggest(const std::string& name, int n) {
    grpc::ClientContext context;
    v1::SuggestTrialsRequest suggest;
    suggest.set_study_name(name);
    suggest.set_count(n);
    suggest.set_client_id(absl::StrCat("c", next_client_++));
    v1::SuggestTrialsResponse suggested;
    ASSERT_TRUE(stub_->SuggestTrials(&context, suggest, &suggested).ok());
  }

  grpc::Status GetStudy(const std::string& name, v1::Study* study) {
    grpc::ClientContext context;
    v1::GetStudyRequest request;
    request.set_name(name);
    return stub_->GetStudy(&context, request, study);
  }

  test::TempDir dir_;
  int next_client_ = 0;
  std::unique_ptr<service::Server> server_;
  std::unique_ptr<v1::HyperTune::Stub> stub_;
};

// The review's case: a client cancelled after sending its study and 300
// trials, before ending the stream, left the study stored and its retry
// met ALREADY_EXISTS. Now nothing is stored and the retry succeeds.
TEST_F(StreamHardeningTest, ACancelledImportStoresNothing) {
  const std::vector<v1::ImportStudyRequest> messages =
      ImportMessages("im", 300);
  {
    grpc::ClientContext context;
    v1::Study response;
    auto writer = stub_->ImportStudy(&context, &response);
    for (const v1::ImportStudyRequest& m : messages)
      ASSERT_TRUE(writer->Write(m));
    // No WritesDone: the client goes away mid-stream.
    context.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // And one whose deadline passes mid-stream.
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(300));
    v1::Study response;
    auto writer = stub_->ImportStudy(&context, &response);
    for (const v1::ImportStudyRequest& m : messages)
      ASSERT_TRUE(writer->Write(m));
    grpc::Status status = writer->Finish();  // waits out the deadline
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  grpc::ClientContext context;
  v1::Study imported;
  auto writer = stub_->ImportStudy(&context, &imported);
  for (const v1::ImportStudyRequest& m : messages)
    ASSERT_TRUE(writer->Write(m));
  ASSERT_TRUE(writer->WritesDone());
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(imported.trial_counts().at("COMPLETED"), 300);
  v1::Study stored;
  ASSERT_TRUE(GetStudy("im", &stored).ok());
  EXPECT_EQ(stored.trial_counts().at("COMPLETED"), 300);
}

// At most kMaxConcurrentImportsPerOwner ImportStudy streams of one owner
// (auth off: one client host) are read at once (each holds its trials until
// stored): with that many held open, the next is refused with
// RESOURCE_EXHAUSTED, and admitted again once one ends. The
// server takes a stream's place when its handler starts, which a client
// cannot see: the next import is tried until refused (each under a name of
// its own, so one admitted before the places were taken stores harmlessly).
TEST_F(StreamHardeningTest, ImportsAreCappedPerOwner) {
  // A held stream writes its study, then its trials a message at a time
  // when asked whether the server still reads it (see below).
  struct Held {
    grpc::ClientContext context;
    v1::Study response;
    std::unique_ptr<grpc::ClientWriter<v1::ImportStudyRequest>> writer;
    std::vector<v1::ImportStudyRequest> messages;
    size_t sent = 0;
  };
  int opened = 0;
  auto hold = [&] {
    auto h = std::make_unique<Held>();
    h->context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(60));
    h->writer = stub_->ImportStudy(&h->context, &h->response);
    h->messages = ImportMessages(absl::StrCat("held", opened++), 50 * 32);
    EXPECT_TRUE(h->writer->Write(h->messages[h->sent++]));
    return h;  // no WritesDone: the stream stays open
  };
  std::vector<std::unique_ptr<Held>> held;
  for (int i = 0; i < kMaxConcurrentImportsPerOwner; ++i) {
    held.push_back(hold());
  }
  // A held stream whose handler started after an import below had taken
  // the last place was refused itself, so every import goes on being
  // admitted: a write to it fails once the server has answered, and it is
  // opened again.
  auto reopen_refused = [&] {
    for (std::unique_ptr<Held>& h : held) {
      if (h->sent == h->messages.size() ||
          h->writer->Write(h->messages[h->sent++])) {
        continue;
      }
      h->writer->Finish().ok();
      h = hold();
    }
  };
  int attempt = 0;
  auto one_more = [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    v1::Study response;
    auto writer = stub_->ImportStudy(&context, &response);
    for (const v1::ImportStudyRequest& m :
         ImportMessages(absl::StrCat("next", attempt++), 3)) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  };
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  grpc::Status refused = one_more();
  while (refused.ok() && std::chrono::steady_clock::now() < give_up) {
    reopen_refused();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    refused = one_more();
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("ImportStudy"));
  EXPECT_THAT(refused.error_message(),
              HasSubstr(absl::StrCat(kMaxConcurrentImportsPerOwner,
                                     " imports of this owner")));

  // One held stream ends (cancelled: it stores nothing); another import
  // gets its place.
  held.back()->context.TryCancel();
  held.back()->writer->Finish().ok();
  held.pop_back();
  grpc::Status admitted = refused;
  while (!admitted.ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    admitted = one_more();
  }
  EXPECT_TRUE(admitted.ok()) << admitted.error_message();
  for (auto& h : held) {
    h->context.TryCancel();
    h->writer->Finish().ok();
  }
  v1::Study study;
  EXPECT_EQ(GetStudy("held0", &study).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// The review's case: two streams that sent their study and stalled held
// both import places for as long as their connections lived, so every
// import on the server failed with RESOURCE_EXHAUSTED. A stream silent for
// the idle timeout is now cancelled by the server (before its client's own
// deadline), storing nothing, and its place goes to the next import.
TEST_F(StreamHardeningTest, AStalledImportIsCancelledAndGivesItsPlaceBack) {
  service::ServerOptions options = Options();
  options.import_idle_timeout = absl::Seconds(1);
  Restart(options);
  std::vector<std::unique_ptr<Stalled>> stalled;
  for (int i = 0; i < kMaxConcurrentImportsPerOwner; ++i) {
    stalled.push_back(Stall(absl::StrCat("stalled", i)));
  }
  for (auto& s : stalled) {
    const grpc::Status status = s->writer->Finish();  // the server ends it
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED)
        << status.error_message();
    EXPECT_LT(std::chrono::system_clock::now(), s->context.deadline());
  }
  const grpc::Status next = Import("next", 120);
  EXPECT_TRUE(next.ok()) << next.error_message();
  v1::Study study;
  EXPECT_EQ(GetStudy("stalled0", &study).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// One owner's stalled imports take only that owner's share: another owner
// imports meanwhile.
TEST_F(StreamHardeningTest, OneOwnersStalledImportsLeaveOthersTheirShare) {
  service::ServerOptions options = Options();
  options.auth_token_file = dir_.File("tokens");
  {
    std::ofstream tokens(options.auth_token_file);
    tokens << "alice-token-0123456789 alice\nbob-token-0123456789 bob\n";
  }
  Restart(options);
  // Her share is taken: stalled streams are opened until one more of hers
  // is refused (the server starts their handlers when it can; one started
  // after her share was full is refused itself and stores nothing).
  std::vector<std::unique_ptr<Stalled>> alices;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  grpc::Status hers = grpc::Status::OK;
  for (int i = 0; hers.ok() && std::chrono::steady_clock::now() < give_up;
       ++i) {
    if (alices.size() < 16) {
      alices.push_back(
          Stall(absl::StrCat("alice", i), "alice-token-0123456789"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    hers = Import(absl::StrCat("alice-more", i), 3, "alice-token-0123456789");
  }
  EXPECT_EQ(hers.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // ...and bob imports all the same.
  const grpc::Status his = Import("bobs", 120, "bob-token-0123456789");
  EXPECT_TRUE(his.ok()) << his.error_message();
  for (auto& s : alices) {
    s->context.TryCancel();
    s->writer->Finish().ok();
  }
}

// One client (auth off: its address is the owner) may hold
// kMaxWatchStreamsPerOwner watchers; the next is refused with
// RESOURCE_EXHAUSTED until one closes.
TEST_F(StreamHardeningTest, WatchStreamsAreCappedPerOwner) {
  CreateAndSuggest("w", 1);
  v1::WatchTrialsRequest request;
  request.set_study_name("w");
  struct Watcher {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::TrialEvent>> reader;
  };
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kMaxWatchStreamsPerOwner; ++i) {
    auto w = std::make_unique<Watcher>();
    w->reader = stub_->WatchTrials(&w->context, request);
    v1::TrialEvent event;
    ASSERT_TRUE(w->reader->Read(&event)) << "watcher " << i;  // it is served
    watchers.push_back(std::move(w));
  }
  auto one_more = [&] {
    Watcher w;
    w.context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
    w.reader = stub_->WatchTrials(&w.context, request);
    v1::TrialEvent event;
    if (w.reader->Read(&event)) {
      w.context.TryCancel();
      w.reader->Finish().ok();
      return grpc::Status::OK;
    }
    return w.reader->Finish();
  };
  grpc::Status refused = one_more();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("WatchTrials"));
  EXPECT_THAT(refused.error_message(),
              HasSubstr(absl::StrCat(kMaxWatchStreamsPerOwner)));

  // A closed watcher frees its place (once the server has seen it go).
  watchers.back()->context.TryCancel();
  watchers.back()->reader->Finish().ok();
  watchers.pop_back();
  // The server notices a gone watcher at its next poll (kWatchPoll).
  grpc::Status admitted = refused;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!admitted.ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    admitted = one_more();
  }
  EXPECT_TRUE(admitted.ok()) << admitted.error_message();
  for (auto& w : watchers) {
    w->context.TryCancel();
    w->reader->Finish().ok();
  }
}

// The threads of this process (the server runs in it).
int ThreadCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++n;
  }
  return n;
}

// Before, each open WatchTrials stream held a server thread until it
// closed. Now kMaxWatchStreamsPerOwner idle watchers add no thread for
// each, and every one of them still sees a trial written after they went
// idle.
TEST_F(StreamHardeningTest, IdleWatchStreamsHoldNoThread) {
  CreateAndSuggest("idle", 1);
  v1::WatchTrialsRequest request;
  request.set_study_name("idle");
  struct Watcher {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::TrialEvent>> reader;
  };
  const int before = ThreadCount();
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kMaxWatchStreamsPerOwner; ++i) {
    auto w = std::make_unique<Watcher>();
    w->context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(60));
    w->reader = stub_->WatchTrials(&w->context, request);
    v1::TrialEvent event;
    ASSERT_TRUE(w->reader->Read(&event)) << "watcher " << i;
    EXPECT_EQ(event.trial().id(), 1);
    watchers.push_back(std::move(w));
  }
  const int during = ThreadCount();
  std::cout << "threads: " << before << " before, " << during << " with "
            << watchers.size() << " idle watchers\n";
  // gRPC may start a few threads of its own; not one per stream.
  EXPECT_LT(during - before, kMaxWatchStreamsPerOwner / 4)
      << before << " threads before, " << during << " with " << watchers.size()
      << " idle watchers";

  Suggest("idle", 1);
  for (size_t i = 0; i < watchers.size(); ++i) {
    v1::TrialEvent event;
    ASSERT_TRUE(watchers[i]->reader->Read(&event)) << "watcher " << i;
    EXPECT_EQ(event.trial().id(), 2) << "watcher " << i;
  }
  for (auto& w : watchers) {
    w->context.TryCancel();
    w->reader->Finish().ok();
  }
}

// A watched study that is deleted ends its streams with NOT_FOUND.
TEST_F(StreamHardeningTest, AWatchEndsWhenItsStudyIsDeleted) {
  CreateAndSuggest("gone", 1);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1::WatchTrialsRequest request;
  request.set_study_name("gone");
  auto reader = stub_->WatchTrials(&context, request);
  v1::TrialEvent event;
  ASSERT_TRUE(reader->Read(&event));
  {
    grpc::ClientContext delete_context;
    v1::DeleteStudyRequest remove;
    remove.set_name("gone");
    v1::DeleteStudyResponse removed;
    ASSERT_TRUE(stub_->DeleteStudy(&delete_context, remove, &removed).ok());
  }
  while (reader->Read(&event)) {
  }
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND)
      << status.error_message();
}

}  // namespace
}  // namespace hypertune
