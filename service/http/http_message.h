// The HTTP server's view of one request and the answer it builds
// (http_server.h): what the routes read and write, independent of the
// library that parses and sends them.
//
// Not thread-safe: a request and its answer belong to one handler at a time.
#ifndef HYPERTUNE_SERVICE_HTTP_HTTP_MESSAGE_H_
#define HYPERTUNE_SERVICE_HTTP_HTTP_MESSAGE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace hypertune::service {

class EventStream;

struct HttpRequest {
  std::string method;  // GET, HEAD, POST...
  std::string path;    // decoded, without the query
  std::string body;
  // In arrival order; names compare without case.
  std::vector<std::pair<std::string, std::string>> headers;
  // Query parameters, decoded, in order (a name may repeat).
  std::vector<std::pair<std::string, std::string>> params;
  // The route pattern's whole match and its groups.
  std::vector<std::string> matches;

  bool has_header(absl::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (absl::EqualsIgnoreCase(key, name)) return true;
    }
    return false;
  }
  // The first header `name`'s value; empty if none.
  std::string get_header_value(absl::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (absl::EqualsIgnoreCase(key, name)) return value;
    }
    return "";
  }
  bool has_param(absl::string_view name) const {
    return get_param_value_count(name) > 0;
  }
  // The `index`th value of parameter `name`; empty if none.
  std::string get_param_value(absl::string_view name, size_t index = 0) const {
    for (const auto& [key, value] : params) {
      if (key == name && index-- == 0) return value;
    }
    return "";
  }
  size_t get_param_value_count(absl::string_view name) const {
    size_t n = 0;
    for (const auto& [key, value] : params) n += key == name ? 1 : 0;
    return n;
  }
};

struct HttpResponse {
  // Fills `chunk` with the next piece of a streamed answer; true with an
  // empty chunk at the end, false to cut the connection (an error midway).
  using Chunks = std::function<bool(std::string* chunk)>;

  int status = 404;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
  // A body that outlives the answer (an embedded asset), sent uncopied in
  // place of `body` when not empty.
  std::string_view static_body;
  // A streamed answer (content_type set, no body): pulled chunk by chunk.
  Chunks chunks;
  // An event stream (event_streams.h), fed while the connection waits.
  std::shared_ptr<EventStream> events;

  void set_header(absl::string_view name, absl::string_view value) {
    for (auto& [key, old] : headers) {
      if (absl::EqualsIgnoreCase(key, name)) {
        old = std::string(value);
        return;
      }
    }
    headers.emplace_back(std::string(name), std::string(value));
  }
  bool has_header(absl::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (absl::EqualsIgnoreCase(key, name)) return true;
    }
    return false;
  }
  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
  void set_content(const char* data, size_t size, std::string type) {
    body.assign(data, size);
    content_type = std::move(type);
  }
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_HTTP_MESSAGE_H_
