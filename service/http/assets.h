// The dashboard's files, embedded in the program at build time from
// dashboard/ (with the charting library, d3, when npm was there to install
// it; otherwise the plain page: tables and text without charts).
//
// Immutable static data; thread-safe.
#ifndef HYPERTUNE_SERVICE_HTTP_ASSETS_H_
#define HYPERTUNE_SERVICE_HTTP_ASSETS_H_

#include <string_view>

namespace hypertune::service {

struct Asset {
  std::string_view path;  // "/index.html", "/assets/app.js", ...
  std::string_view content_type;
  // A strong ETag (quoted): the start of the file's SHA-256.
  std::string_view etag;
  std::string_view data;
};

// The asset served at `path`, or nullptr.
const Asset* FindAsset(std::string_view path);

// Whether the charting library was built in.
bool DashboardHasCharts();

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_ASSETS_H_
