// HttpServer for builds without cpp-httplib (libcpp-httplib-dev): --http is
// refused with a message saying what to install; everything else works.
#include "absl/status/status.h"
#include "service/http/http_server.h"

namespace httplib {
// Never instantiated: only lets unique_ptr<Server> be destroyed.
class Server {};
}  // namespace httplib

namespace hypertune::service {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    StudyService*, Authorizer, Metrics*,
    HttpServerOptions options) {
  return absl::UnimplementedError(
      "--http " + options.listen +
      ": this hypertuned was built without cpp-httplib (install "
      "libcpp-httplib-dev and rebuild)");
}

HttpServer::~HttpServer() = default;

void HttpServer::Shutdown() {}

}  // namespace hypertune::service
