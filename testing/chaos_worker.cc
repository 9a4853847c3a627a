// chaos_worker: a small training program for the chaos test and soak
// (testing/chaos.h), written against the SDK as a user would.
//
//   chaos_worker --server HOST:PORT --study NAME --client-id ID --acks FILE
//                [--errors FILE] [--reports N] [--report-ms MS]
//
// Loops NextTrial -> reports at steps 1..N (resuming after the last step a
// previous holder recorded, with a checkpoint per step) -> Complete, until
// the study is COMPLETED; then exits 0. Each completion the server
// acknowledged (Complete returned OK) is appended to the acks file as a line
// "TRIAL_ID VALUE\n", flushed, and only then. The final value is
// ChaosObjective(parameters) + 1e-3 * lease_epoch: a retry by the same holder
// sends the same value, while two holders of one trial would send different
// ones, so a trial acknowledged twice shows up as two values.
//
// Errors a worker must expect under chaos (the server down, the lease lost)
// are handled by retrying or dropping the trial; any other error is appended
// to the errors file as "CODE message" and the trial dropped.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using std::chrono::milliseconds;

struct Flags {
  std::string server;
  std::string study;
  std::string client_id;
  std::string acks;
  std::string errors;
  int reports = 3;
  int report_ms = 30;
};

// The objective of the chaos study: sum of (x_i - 0.3)^2 over its double
// parameters. (testing/chaos.cc creates the study.)
double ChaosObjective(const v1::Trial& trial) {
  double sum = 0;
  for (const v1::ParameterValue& p : trial.parameters()) {
    if (p.value_case() == v1::ParameterValue::kDoubleValue) {
      sum += (p.double_value() - 0.3) * (p.double_value() - 0.3);
    }
  }
  return sum;
}

bool Transient(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsCancelled(s) || absl::IsAborted(s);
}

// The lease is gone: the trial went to another worker, or was finished.
bool LeaseLost(const absl::Status& s) { return absl::IsFailedPrecondition(s); }

class Worker {
 public:
  Worker(Flags flags, std::FILE* acks, std::FILE* errors)
      : flags_(std::move(flags)), acks_(acks), errors_(errors) {
    ClientOptions options;
    options.server = flags_.server;
    options.client_id = flags_.client_id;
    options.call_timeout = milliseconds(5000);
    options.initial_backoff = milliseconds(50);
    options.max_backoff = milliseconds(1000);
    client_.emplace(options);
  }

  int Run() {
    while (true) {
      auto next = client_->NextTrial(flags_.study);
      if (!next.ok()) {
        if (!Transient(next.status())) Unexpected("NextTrial", next.status());
        std::this_thread::sleep_for(milliseconds(100));
        continue;
      }
      if (!next->has_value()) return 0;  // The study is COMPLETED.
      RunTrial(**next);
    }
  }

 private:
  void RunTrial(Trial& trial) {
    const double base = ChaosObjective(trial.proto());
    int64_t first = 1;
    for (const v1::Measurement& m : trial.proto().measurements()) {
      first = std::max(first, m.step() + 1);
    }
    for (int64_t step = first; step <= flags_.reports; ++step) {
      std::this_thread::sleep_for(milliseconds(flags_.report_ms));
      // Intermediate values depend on the parameters and step only, so a
      // re-sent report is the same payload.
      if (!Retrying("Report", [&] {
            return trial.Report(step, {{"loss", base + 1.0 / step}});
          })) {
        return;
      }
      if (!Retrying("SetCheckpoint", [&] {
            return trial.SetCheckpoint(
                absl::StrCat("chaos://", trial.id(), "/", step));
          })) {
        return;
      }
    }
    const double value = base + 1e-3 * static_cast<double>(trial.lease_epoch());
    if (!Retrying("Complete", [&] {
          return trial.Complete({{"loss", value}});
        })) {
      return;
    }
    // Only now is the completion acknowledged. One write of a whole line:
    // a kill before it loses the line, never half of it.
    std::fprintf(acks_, "%lld %.17g\n", static_cast<long long>(trial.id()),
                 value);
    std::fflush(acks_);
  }

  // Runs `call` until it succeeds (true), the lease is lost (false), or an
  // error neither transient nor a lost lease (recorded; false).
  template <typename Call>
  bool Retrying(const char* what, Call call) {
    for (int attempt = 1;; ++attempt) {
      absl::Status s = call();
      if (s.ok()) return true;
      if (LeaseLost(s)) return false;
      if (!Transient(s) || attempt >= 20) {
        Unexpected(what, s);
        return false;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  void Unexpected(const char* what, const absl::Status& s) {
    const std::string line =
        absl::StrFormat("%s %s: %s", absl::StatusCodeToString(s.code()), what,
                        std::string(s.message()));
    std::cerr << "chaos_worker " << flags_.client_id << ": " << line << "\n";
    if (errors_ != nullptr) {
      std::fprintf(errors_, "%s\n", line.c_str());
      std::fflush(errors_);
    }
  }

  const Flags flags_;
  std::FILE* const acks_;
  std::FILE* const errors_;
  std::optional<Client> client_;
};

int Usage(const std::string& message) {
  std::cerr << "chaos_worker: " << message
            << "\nusage: chaos_worker --server HOST:PORT --study NAME "
               "--client-id ID --acks FILE [--errors FILE] [--reports N] "
               "[--report-ms MS]\n";
  return 2;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage(absl::StrCat(arg, " needs a value"));
    std::string value = argv[++i];
    bool ok = true;
    if (arg == "--server") {
      flags.server = value;
    } else if (arg == "--study") {
      flags.study = value;
    } else if (arg == "--client-id") {
      flags.client_id = value;
    } else if (arg == "--acks") {
      flags.acks = value;
    } else if (arg == "--errors") {
      flags.errors = value;
    } else if (arg == "--reports") {
      ok = absl::SimpleAtoi(value, &flags.reports) && flags.reports >= 0;
    } else if (arg == "--report-ms") {
      ok = absl::SimpleAtoi(value, &flags.report_ms) && flags.report_ms >= 0;
    } else {
      return Usage(absl::StrCat("unknown flag ", arg));
    }
    if (!ok) return Usage(absl::StrCat(arg, ": not a count: ", value));
  }
  if (flags.server.empty() || flags.study.empty() || flags.client_id.empty() ||
      flags.acks.empty()) {
    return Usage("--server, --study, --client-id and --acks are required");
  }
  std::FILE* acks = std::fopen(flags.acks.c_str(), "a");
  if (acks == nullptr) {
    return Usage(absl::StrCat(flags.acks, ": ", std::strerror(errno)));
  }
  std::FILE* errors = nullptr;
  if (!flags.errors.empty()) {
    errors = std::fopen(flags.errors.c_str(), "a");
    if (errors == nullptr) {
      return Usage(absl::StrCat(flags.errors, ": ", std::strerror(errno)));
    }
  }
  const int status = Worker(flags, acks, errors).Run();
  std::fclose(acks);
  if (errors != nullptr) std::fclose(errors);
  return status;
}

}  // namespace
}  // namespace hypertune

int main(int argc, char** argv) { return hypertune::Main(argc, argv); }
