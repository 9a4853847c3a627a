// The HTTP side under the outside review's attacks: idle connections that
// would stall the port, one owner's event streams crowding out another's,
// Nagle's delay on kept-alive answers, per-study metrics of other owners,
// and plain HTTP next to TLS gRPC.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "testing/http_test_util.h"
#include "testing/test_certs.h"
// After Eigen (through the server's headers): httplib.h brings <resolv.h>,
// whose `_res` macro breaks Eigen's parameter names.
#include "httplib.h"

namespace hypertune::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int PortOf(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  return port;
}

// A TCP connection to 127.0.0.1:`port` that sends nothing.
int ConnectSilently(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return fd;
}

class HttpHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteTokenFile(dir_.File("tokens")).ok());
    ASSERT_TRUE(WriteStudy(dir_.File("db"), MakeStudy("alices", "alice"),
                           MakeTrials(MakeStudy("alices", "alice"), 5, 2, 1))
                    .ok());
    ASSERT_TRUE(WriteStudy(dir_.File("db"), MakeStudy("bobs", "bob"),
                           MakeTrials(MakeStudy("bobs", "bob"), 5, 2, 2))
                    .ok());
  }

  std::unique_ptr<service::Server> Start(service::ServerOptions options) {
    options.db_path = dir_.File("db");
    options.listen = "127.0.0.1:0";
    options.http_listen = "127.0.0.1:0";
    options.auth_token_file = dir_.File("tokens");
    auto server = service::Server::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  TempDir dir_;
};

// The review's stall: 40 connections that send nothing held the handler
// pool (32 threads) until the server dropped some of them; only then was an
// authenticated request served (the review measured 10.5 s; the code before
// this fix dropped 11 of them first). Now every connection has a thread of
// its own: the request is answered while all 40 are still open (they are
// dropped only after 5 s of silence). The time it took is recorded, not
// asserted.
TEST_F(HttpHardeningTest, IdleConnectionsDoNotHoldUpAnAuthenticatedRequest) {
  auto server = Start(service::ServerOptions());
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(ConnectSilently(PortOf(server->http_address())));
  }
  httplib::Client client(absl::StrCat("http://", server->http_address()));
  const auto start = std::chrono::steady_clock::now();
  httplib::Result result =
      client.Get("/api/studies",
                 {{"Authorization", absl::StrCat("Bearer ", kAliceToken)}});
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  RecordProperty("answer_ms", std::to_string(ms));
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_THAT(result->body, HasSubstr("alices"));
  int dropped = 0;
  for (int fd : idle) {
    char byte;
    if (::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0) ++dropped;
  }
  EXPECT_EQ(dropped, 0) << "idle connections dropped before the answer";
  for (int fd : idle) ::close(fd);
}

// Kept-alive answers go out at once: the server's connection sockets have
// TCP_NODELAY (the review measured ~43 ms per keep-alive request without).
TEST_F(HttpHardeningTest, ConnectionsHaveNoDelaySet) {
  auto server = Start(service::ServerOptions());
  ASSERT_NE(server, nullptr);
  const int port = PortOf(server->http_address());
  httplib::Client client(absl::StrCat("http://", server->http_address()));
  client.set_keep_alive(true);
  const httplib::Headers auth = {
      {"Authorization", absl::StrCat("Bearer ", kAliceToken)}};
  ASSERT_TRUE(client.Get("/api/studies", auth));
  ASSERT_TRUE(client.Get("/api/studies", auth));
  // The server runs in this process: find its end of the connection (local
  // port = the HTTP port, with a peer) among our descriptors.
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &fd)) continue;
    sockaddr_in local{}, peer{};
    socklen_t length = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0 ||
        local.sin_family != AF_INET || ntohs(local.sin_port) != port) {
      continue;
    }
    length = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) {
      continue;  // the listening socket
    }
    int nodelay = 0;
    length = sizeof(nodelay);
    ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &length), 0);
    EXPECT_NE(nodelay, 0) << "fd " << fd;
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

// Streams open in a background thread until the server ends them.
class StreamHolder {
 public:
  ~StreamHolder() {
    for (std::thread& t : threads_) t.join();
  }
  // Opens an event stream of `study` as `token`, and waits until its first
  // bytes arrive or it is refused; returns the status.
  int Open(const std::string& http, const std::string& study,
           const std::string& token) {
    absl::MutexLock lock(&mu_);
    const int index = static_cast<int>(statuses_.size());
    statuses_.push_back(0);
    threads_.emplace_back([this, http, study, token, index] {
      httplib::Client client(absl::StrCat("http://", http));
      auto result = client.Get(
          absl::StrCat("/api/studies/", study, "/events"),
          {{"Authorization", absl::StrCat("Bearer ", token)}},
          [&](const httplib::Response& response) {
            absl::MutexLock lock(&mu_);
            statuses_[index] = response.status;
            return response.status == 200;
          },
          [](const char*, size_t) { return true; });
      absl::MutexLock lock(&mu_);
      if (statuses_[index] == 0) statuses_[index] = -1;
    });
    struct Answered {
      const std::vector<int>* statuses;
      int index;
      bool operator()() const { return (*statuses)[index] != 0; }
    } answered{&statuses_, index};
    mu_.Await(absl::Condition(&answered));
    return statuses_[index];
  }

 private:
  absl::Mutex mu_;
  std::vector<int> statuses_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

// One owner's dashboards take at most their share of event streams: the
// review's 32 streams of one owner delayed another owner's request by 3 s.
TEST_F(HttpHardeningTest, EventStreamsAreLimitedPerOwner) {
  service::ServerOptions options;
  options.http_max_streams_per_owner = 2;
  auto server = Start(options);
  ASSERT_NE(server, nullptr);
  const std::string http = server->http_address();
  {
    StreamHolder streams;
    EXPECT_EQ(streams.Open(http, "alices", kAliceToken), 200);
    EXPECT_EQ(streams.Open(http, "alices", kAliceToken), 200);
    HttpReply third = HttpGet(http, "/api/studies/alices/events", kAliceToken);
    EXPECT_EQ(third.status, 503);
    EXPECT_THAT(third.body, HasSubstr("event streams of this owner"));
    // Another owner still gets streams and answers.
    EXPECT_EQ(streams.Open(http, "bobs", kBobToken), 200);
    EXPECT_EQ(HttpGet(http, "/api/studies", kBobToken).status, 200);
    server.reset();  // ends the streams
  }
}

// /metrics shows per-study series (lease expiries included) only for the
// scraper's own studies.
TEST_F(HttpHardeningTest, MetricsShowOnlyTheCallersStudies) {
  auto now = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  service::ServerOptions options;
  options.service.now_ms = [now] { return now->load(); };
  options.lease_sweep_interval = absl::Hours(1);
  auto server = Start(options);
  ASSERT_NE(server, nullptr);
  auto stub = MakeStub(server->address());
  v1::Study secret = MakeStudy("alices-secret-plan", "");
  secret.mutable_spec()->set_lease_seconds(1);
  {
    grpc::ClientContext context;
    Authorize(&context, kAliceToken);
    v1::CreateStudyRequest request;
    *request.mutable_study() = secret;
    v1::Study created;
    ASSERT_TRUE(stub->CreateStudy(&context, request, &created).ok());
  }
  auto suggest = [&](const std::string& client) {
    grpc::ClientContext context;
    Authorize(&context, kAliceToken);
    v1::SuggestTrialsRequest request;
    request.set_study_name("alices-secret-plan");
    request.set_count(1);
    request.set_client_id(client);
    v1::SuggestTrialsResponse response;
    EXPECT_TRUE(stub->SuggestTrials(&context, request, &response).ok());
  };
  suggest("a");
  now->fetch_add(10'000);  // a's lease ran out
  suggest("b");
  HttpReply alices = HttpGet(server->http_address(), "/metrics", kAliceToken);
  EXPECT_THAT(alices.body,
              HasSubstr("hypertune_lease_expiries_total{study=\"alices-secret-"
                        "plan\"} 1"));
  HttpReply bobs = HttpGet(server->http_address(), "/metrics", kBobToken);
  EXPECT_EQ(bobs.status, 200);
  EXPECT_THAT(bobs.body, Not(HasSubstr("alices")));
  EXPECT_THAT(bobs.body, HasSubstr("study=\"bobs\""));
}

// With TLS on gRPC the HTTP API speaks HTTPS with the same certificate;
// plain HTTP needs --http-plaintext.
class HttpTlsTest : public HttpHardeningTest {
 protected:
  void SetUp() override {
    if (!HaveOpenssl()) {
      GTEST_SKIP() << "the openssl command-line tool is not installed; the "
                      "TLS tests need it to make their certificates";
    }
    HttpHardeningTest::SetUp();
    std::string log;
    ASSERT_TRUE(pki_.Make(&log)) << log;
  }

  service::ServerOptions Tls() const {
    service::ServerOptions options;
    options.tls_cert_file = pki_.Pem("server");
    options.tls_key_file = pki_.Key("server");
    return options;
  }

  TestPki pki_{dir_.File("")};
};

TEST_F(HttpTlsTest, TheHttpApiServesHttpsWithTheServersCertificate) {
  auto server = Start(Tls());
  ASSERT_NE(server, nullptr);
  httplib::SSLClient https("127.0.0.1", PortOf(server->http_address()));
  https.set_ca_cert_path(pki_.Pem("ca").c_str());
  https.enable_server_certificate_verification(true);
  auto result =
      https.Get("/api/studies",
                {{"Authorization", absl::StrCat("Bearer ", kAliceToken)}});
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_THAT(result->body, HasSubstr("alices"));
  // Plain HTTP gets no answer: a token would cross in the clear.
  EXPECT_EQ(HttpGet(server->http_address(), "/api/studies", kAliceToken).status,
            0);
}

TEST_F(HttpTlsTest, PlainHttpNextToTlsNeedsToBeAskedFor) {
  service::ServerOptions options = Tls();
  options.http_plaintext = true;
  auto server = Start(options);
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(HttpGet(server->http_address(), "/api/studies", kAliceToken).status,
            200);
}

// With a client CA the HTTP API serves only clients whose certificate that
// CA signed: none, or one signed by another CA, is refused.
TEST_F(HttpTlsTest, ClientCertificatesAreCheckedOverHttps) {
  service::ServerOptions options = Tls();
  options.tls_client_ca_file = pki_.Pem("client-ca");
  auto server = Start(options);
  ASSERT_NE(server, nullptr);
  const int port = PortOf(server->http_address());
  const httplib::Headers auth = {
      {"Authorization", absl::StrCat("Bearer ", kAliceToken)}};
  auto status_with = [&](const std::string& name) {
    auto https = name.empty()
                     ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                     : std::make_unique<httplib::SSLClient>(
                           "127.0.0.1", port, pki_.Pem(name), pki_.Key(name));
    https->set_ca_cert_path(pki_.Pem("ca").c_str());
    https->enable_server_certificate_verification(true);
    auto result = https->Get("/api/studies", auth);
    return result ? result->status : 0;
  };
  EXPECT_EQ(status_with("client"), 200);
  EXPECT_NE(status_with(""), 200);
  EXPECT_NE(status_with("stranger"), 200);
}

}  // namespace
}  // namespace hypertune::test
