// The files that `hypertune export`, `import` and `trials import` read and
// write, as pure functions.
//
// Export format (JSON lines): the study first, then one trial per line, in
// id order; each line is the protobuf JSON mapping of the message with the
// proto's field names, printed from its deterministic serialization (map
// entries by key), so that the same messages always give the same bytes.
//
// Trial files (`trials import`): what `hypertune trials --format csv|json`
// writes (the CSV grid, or the ListTrialsResponse JSON document), or JSON
// lines of trials (an export's trial lines).
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_CLI_TRIAL_FILE_H_
#define HYPERTUNE_CLI_TRIAL_FILE_H_

#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

// `message` as one line of the export format, without the newline.
absl::StatusOr<std::string> ExportLine(
    const google::protobuf::Message& message);

// Reads the export format line by line from a stream, so that a large
// export is never held whole: the study's line, then one trial at a time.
// Errors are INVALID_ARGUMENT "SOURCE:LINE: ...".
class ExportReader {
 public:
  // REQUIRES: `in` outlives *this.
  ExportReader(std::istream& in, std::string source)
      : in_(in), source_(std::move(source)) {}
  // The study of the first line that is not blank.
  absl::StatusOr<v1::Study> ReadStudy();
  // The next trial into `trial`: true, or false at the end.
  // REQUIRES: ReadStudy succeeded.
  absl::StatusOr<bool> NextTrial(v1::Trial& trial);
  // The line (1-based) of each trial read so far, in order.
  const std::vector<int>& trial_lines() const { return trial_lines_; }

 private:
  // The next line that is not blank, or false at the end.
  bool NextLine();

  std::istream& in_;
  const std::string source_;
  std::string line_;
  int line_number_ = 0;
  std::vector<int> trial_lines_;
};

// An export file parsed: the study of its first line and the trials of the
// others, with the line (1-based) each came from.
struct ExportFile {
  v1::Study study;
  std::vector<v1::Trial> trials;
  std::vector<int> trial_lines;
};
// `text` as a value of parameter `spec` (named by it): an integer for an
// INTEGER parameter, the text itself for a CATEGORICAL one, else a number.
// INVALID_ARGUMENT "NAME: \"TEXT\" is not an integer" (or "a number").
absl::StatusOr<v1::ParameterValue> ParseParameterValue(
    const v1::ParameterSpec& spec, const std::string& text);

// Parses `text` (the export format; blank lines are skipped).
// INVALID_ARGUMENT "SOURCE:LINE: ..." for a line that is not the message
// it should be.
absl::StatusOr<ExportFile> ParseExportFile(std::string_view text,
                                           const std::string& source);

// The results of a trial file for a study.
struct TrialFile {
  // Parameters and final measurement of each COMPLETED row (rows without a
  // state count as COMPLETED), with its line.
  std::vector<v1::Trial> trials;
  std::vector<int> lines;
  // Lines of the rows left out because they are in another state.
  std::vector<int> skipped_lines;
};
// Parses `text`, CSV or JSON (either form), for `study`: a CSV column is a
// parameter when the study has one of that name (or it is headed
// "param:NAME"), a known trial column (id, state, step, elapsed_seconds,
// client_id, reasons, times, ...) or else a metric (or "metric:NAME").
// INVALID_ARGUMENT "SOURCE:LINE: FIELD: ..." for a bad row.
absl::StatusOr<TrialFile> ParseTrialFile(std::string_view text,
                                         const std::string& source,
                                         const v1::Study& study);

// A server error about `trials[i]` of a request made from a file, told
// as "SOURCE:LINE: ..." with line_of(i); other errors unchanged.
absl::Status AtFileLine(const absl::Status& status, const std::string& source,
                        const std::function<int(int)>& line_of);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_TRIAL_FILE_H_
