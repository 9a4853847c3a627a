#include "cli/worker/worker_text.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "cli/format.h"
#include "cli/worker/worker_protocol.h"

namespace hypertune::cli {

std::string MetricsText(const Metrics& metrics) {
  return absl::StrJoin(metrics, " ", [](std::string* out, const auto& m) {
    absl::StrAppend(out, m.first, "=", FormatShort(m.second));
  });
}

std::string ParametersText(const v1::Trial& trial) {
  return absl::StrJoin(trial.parameters(), " ",
                       [](std::string* out, const v1::ParameterValue& p) {
                         absl::StrAppend(out, p.name(), "=",
                                         FormatParameterValue(p));
                       });
}

std::string ExitText(const ProgramExit& exit) {
  return exit.signaled ? absl::StrCat("killed by signal ", exit.code)
                       : absl::StrCat("exit status ", exit.code);
}

std::string LogTail(const std::filesystem::path& path, int lines) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return "";
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 8192);
  file.seekg(start);
  std::string text((std::istreambuf_iterator<char>(file)), {});
  std::vector<absl::string_view> all = absl::StrSplit(text, '\n');
  if (!all.empty() && all.back().empty()) all.pop_back();
  const size_t first = all.size() > static_cast<size_t>(lines)
                           ? all.size() - static_cast<size_t>(lines)
                           : 0;
  std::string tail;
  for (size_t i = first; i < all.size(); ++i) {
    absl::StrAppend(&tail, "  ", all[i], "\n");
  }
  return tail;
}

}  // namespace hypertune::cli
