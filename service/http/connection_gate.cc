#include "service/http/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace hypertune::service {
namespace {

// Header blocks larger than this are refused: a client that sends more
// without ending its headers is not a client of this API.
constexpr size_t kMaxHeaderBytes = 32 << 10;
// How long accept() rests once the process is out of file descriptors.
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);

// The peer's address without the port: what the per-address cap counts.
std::string AddressOf(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = {};
  if (peer.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(peer);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(peer);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
  }
  return text;
}

// epoll_wait's timeout until `next`: -1 for never, rounded up so that a
// deadline is not checked a millisecond early and missed.
int TimeoutMs(absl::Time next, absl::Time now) {
  if (next == absl::InfiniteFuture()) return -1;
  if (next <= now) return 0;
  const int64_t ms =
      absl::ToInt64Milliseconds(absl::Ceil(next - now, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

}  // namespace

thread_local ConnectionGate::Connection* ConnectionGate::current_ = nullptr;

ConnectionGate::ConnectionGate(int listen_fd, ConnectionGateOptions options,
                               std::unique_ptr<httplib::TaskQueue> workers,
                               Serve serve)
    : listen_fd_(listen_fd),
      options_(std::move(options)),
      workers_(std::move(workers)),
      serve_(std::move(serve)),
      peek_(kMaxHeaderBytes) {}

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Start(
    int listen_fd, ConnectionGateOptions options,
    std::unique_ptr<httplib::TaskQueue> workers, Serve serve) {
  std::unique_ptr<ConnectionGate> gate(new ConnectionGate(
      listen_fd, std::move(options), std::move(workers), std::move(serve)));
  gate->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  gate->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (gate->epoll_fd_ < 0 || gate->wake_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("http: cannot watch connections: ", std::strerror(errno)));
  }
  const int flags = ::fcntl(listen_fd, F_GETFL);
  epoll_event listen_event{};
  listen_event.events = EPOLLIN;
  listen_event.data.ptr = nullptr;
  epoll_event wake_event{};
  wake_event.events = EPOLLIN;
  wake_event.data.ptr = &gate->wake_fd_;
  if (flags < 0 || ::fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      ::epoll_ctl(gate->epoll_fd_, EPOLL_CTL_ADD, listen_fd, &listen_event) !=
          0 ||
      ::epoll_ctl(gate->epoll_fd_, EPOLL_CTL_ADD, gate->wake_fd_,
                  &wake_event) != 0) {
    return absl::InternalError(absl::StrCat(
        "http: cannot watch the listening socket: ", std::strerror(errno)));
  }
  ConnectionGate* raw = gate.get();
  gate->thread_ = std::thread([raw] { raw->Run(); });
  return gate;
}

ConnectionGate::~ConnectionGate() {
  Stop();
  Drain();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ConnectionGate::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      // Requests being answered to a trusted caller finish; the rest (a
      // connection waiting for its next request, or still owing headers or
      // a body, or untrusted) would only hold up the end.
      for (const auto& [connection, owned] : connections_) {
        if (!connection->waiting &&
            (connection->between_requests ||
             connection->deadline != absl::InfiniteFuture())) {
          ::shutdown(connection->watch_fd, SHUT_RDWR);
        }
      }
    }
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

void ConnectionGate::Drain() {
  {
    absl::MutexLock lock(&mu_);
    if (drained_) return;
    drained_ = true;
  }
  workers_->shutdown();
}

void ConnectionGate::Wake() {
  const uint64_t one = 1;
  // A full counter means a wake-up is pending already.
  [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));
}

void ConnectionGate::Run() {
  epoll_event events[64];
  while (true) {
    int timeout_ms;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      absl::Time next = ExpireDeadlines();
      const absl::Time now = absl::Now();
      if (accept_paused_until_ != absl::InfinitePast()) {
        if (now >= accept_paused_until_) {
          epoll_event listen_event{};
          listen_event.events = EPOLLIN;
          listen_event.data.ptr = nullptr;
          ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &listen_event);
          accept_paused_until_ = absl::InfinitePast();
        } else {
          next = std::min(next, accept_paused_until_);
        }
      }
      next_wake_ = next;
      timeout_ms = TimeoutMs(next, now);
    }
    const int ready = ::epoll_wait(epoll_fd_, events, 64, timeout_ms);
    for (int i = 0; i < ready; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == nullptr) {
        AcceptAll();
      } else if (tag == &wake_fd_) {
        uint64_t count;
        [[maybe_unused]] ssize_t got = ::read(wake_fd_, &count, sizeof(count));
      } else {
        Examine(static_cast<Connection*>(tag));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  std::vector<Connection*> waiting;
  for (const auto& [connection, owned] : connections_) {
    if (connection->waiting) waiting.push_back(connection);
  }
  for (Connection* connection : waiting) Drop(connection);
}

void ConnectionGate::AcceptAll() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer),
                             &length, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        // The connection stays in the backlog; the listening socket would
        // report it ready again at once.
        absl::MutexLock lock(&mu_);
        epoll_event paused{};
        paused.data.ptr = nullptr;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &paused);
        accept_paused_until_ = absl::Now() + kAcceptPause;
      }
      return;
    }
    std::string address = AddressOf(peer);
    Connection* handed_over = nullptr;
    {
      absl::MutexLock lock(&mu_);
      int& open = open_by_address_[address];
      if (open >= options_.max_per_address) {
        ::close(fd);
        continue;
      }
      ++open;
      auto owned = std::make_unique<Connection>();
      Connection* connection = owned.get();
      connection->gate = this;
      connection->fd = fd;
      connection->address = std::move(address);
      connection->deadline = absl::InfiniteFuture();
      connections_.emplace(connection, std::move(owned));
      SetDeadline(connection, absl::Now() + options_.header_timeout);
      if (options_.wait_for_headers) {
        // Edge-triggered: every arrival of bytes reports the socket once,
        // though what it peeked at is still unread.
        epoll_event event{};
        event.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
        event.data.ptr = connection;
        if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
          Drop(connection);
        }
      } else if (HandOver(connection)) {
        handed_over = connection;
      }
    }
    if (handed_over != nullptr) Dispatch(handed_over);
  }
}

void ConnectionGate::Examine(Connection* connection) {
  const ssize_t seen = ::recv(connection->fd, peek_.data(), peek_.size(),
                              MSG_PEEK | MSG_DONTWAIT);
  const int error = errno;
  bool handed_over = false;
  {
    absl::MutexLock lock(&mu_);
    if (seen < 0 &&
        (error == EAGAIN || error == EWOULDBLOCK || error == EINTR)) {
      return;
    }
    if (seen <= 0) {  // closed by the client, or failed
      Drop(connection);
      return;
    }
    const std::string_view bytes(peek_.data(), static_cast<size_t>(seen));
    if (bytes.find("\r\n\r\n") != std::string_view::npos ||
        bytes.find("\n\n") != std::string_view::npos) {
      handed_over = HandOver(connection);
    } else if (static_cast<size_t>(seen) == peek_.size()) {
      Drop(connection);
    }
  }
  if (handed_over) Dispatch(connection);
}

bool ConnectionGate::HandOver(Connection* connection) {
  if (options_.wait_for_headers) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection->fd, nullptr);
  }
  connection->watch_fd = ::fcntl(connection->fd, F_DUPFD_CLOEXEC, 0);
  if (connection->watch_fd < 0) {
    Drop(connection);
    return false;
  }
  connection->waiting = false;
  return true;
}

void ConnectionGate::Dispatch(Connection* connection) {
  workers_->enqueue([connection] {
    current_ = connection;
    connection->gate->serve_(connection->fd);
    current_ = nullptr;
    connection->gate->Finished(connection);
  });
}

void ConnectionGate::Drop(Connection* connection) {
  if (connection->waiting && options_.wait_for_headers) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection->fd, nullptr);
  }
  ::close(connection->fd);
  Forget(connection);
}

void ConnectionGate::Finished(Connection* connection) {
  absl::MutexLock lock(&mu_);
  Forget(connection);
}

void ConnectionGate::Forget(Connection* connection) {
  SetDeadline(connection, absl::InfiniteFuture());
  ReleaseUntrustedSlot(connection);
  auto open = open_by_address_.find(connection->address);
  if (open != open_by_address_.end() && --open->second == 0) {
    open_by_address_.erase(open);
  }
  if (connection->watch_fd >= 0) ::close(connection->watch_fd);
  connections_.erase(connection);
}

void ConnectionGate::SetDeadline(Connection* connection, absl::Time deadline) {
  if (connection->deadline != absl::InfiniteFuture()) {
    deadlines_.erase({connection->deadline, connection});
  }
  connection->deadline = deadline;
  if (deadline == absl::InfiniteFuture()) return;
  deadlines_.emplace(deadline, connection);
  if (deadline < next_wake_) Wake();
}

void ConnectionGate::ReleaseUntrustedSlot(Connection* connection) {
  if (!connection->holds_untrusted_slot) return;
  connection->holds_untrusted_slot = false;
  --untrusted_;
}

absl::Time ConnectionGate::ExpireDeadlines() {
  const absl::Time now = absl::Now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    Connection* connection = deadlines_.begin()->second;
    if (connection->waiting) {
      Drop(connection);
      continue;
    }
    // Ends the worker's read (or write); the worker then closes the socket
    // and calls Finished.
    ::shutdown(connection->watch_fd, SHUT_RDWR);
    SetDeadline(connection, absl::InfiniteFuture());
  }
  return deadlines_.empty() ? absl::InfiniteFuture()
                            : deadlines_.begin()->first;
}

void ConnectionGate::HeadersIn(bool trusted, bool has_body) {
  Connection* connection = current_;
  if (connection == nullptr) return;
  ConnectionGate* gate = connection->gate;
  absl::MutexLock lock(&gate->mu_);
  connection->between_requests = false;
  connection->trusted = trusted;
  if (trusted) {
    gate->SetDeadline(connection,
                      has_body ? absl::Now() + gate->options_.body_timeout
                               : absl::InfiniteFuture());
  }
}

void ConnectionGate::BodyIn() {
  Connection* connection = current_;
  if (connection == nullptr) return;
  ConnectionGate* gate = connection->gate;
  absl::MutexLock lock(&gate->mu_);
  if (connection->trusted) {
    gate->SetDeadline(connection, absl::InfiniteFuture());
  }
}

bool ConnectionGate::TakeUntrustedSlot() {
  Connection* connection = current_;
  if (connection == nullptr) return true;
  ConnectionGate* gate = connection->gate;
  absl::MutexLock lock(&gate->mu_);
  if (connection->holds_untrusted_slot) return true;
  if (gate->untrusted_ >= gate->options_.max_untrusted) return false;
  ++gate->untrusted_;
  connection->holds_untrusted_slot = true;
  return true;
}

bool ConnectionGate::ClosesAfterAnswer() {
  Connection* connection = current_;
  if (connection == nullptr) return false;
  ConnectionGate* gate = connection->gate;
  absl::MutexLock lock(&gate->mu_);
  return !connection->trusted || gate->stopping_;
}

void ConnectionGate::Answered() {
  Connection* connection = current_;
  if (connection == nullptr) return;
  ConnectionGate* gate = connection->gate;
  absl::MutexLock lock(&gate->mu_);
  gate->ReleaseUntrustedSlot(connection);
  if (!connection->trusted || gate->stopping_) {
    // The answer is queued already; the shutdown sends it, then the end.
    ::shutdown(connection->watch_fd, SHUT_RDWR);
    gate->SetDeadline(connection, absl::InfiniteFuture());
  } else {
    gate->SetDeadline(connection,
                      absl::Now() + gate->options_.header_timeout);
  }
  connection->trusted = false;
  connection->between_requests = true;
}

}  // namespace hypertune::service
