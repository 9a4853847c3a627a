#include "service/server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "storage/sqlite_store.h"

namespace hypertune::service {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  storage::SqliteOptions db_options;
  db_options.durable_full = options.durable_full;
  auto store = storage::SqliteStore::Open(options.db_path, db_options);
  if (!store.ok()) return store.status();

  std::unique_ptr<Server> server(new Server());
  server->store_ = *std::move(store);
  server->service_ =
      std::make_unique<StudyService>(server->store_.get(), options.service);
  server->grpc_service_ = std::make_unique<GrpcService>(server->service_.get());
  if (absl::Status s = server->service_->ExtendLeasesOnStart(); !s.ok()) {
    return s;
  }
  server->sweeper_ = std::make_unique<LeaseSweeper>(
      server->service_.get(), options.lease_sweep_interval);

  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(server->grpc_service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("listen: cannot bind ", options.listen));
  }
  std::string host = options.listen.substr(0, options.listen.rfind(':'));
  server->address_ = absl::StrCat(host, ":", port);
  return server;
}

Server::~Server() {
  Shutdown();
  Wait();
}

void Server::Shutdown() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
  }
}

void Server::Wait() {
  if (server_ != nullptr) server_->Wait();
  sweeper_.reset();
}

}  // namespace hypertune::service
