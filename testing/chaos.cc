#include "testing/chaos.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "storage/open_store.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kStudy[] = "chaos";
// How often the harness looks at its processes and the acknowledgements.
constexpr milliseconds kPollEvery{20};

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

v1::Study ChaosStudy(const ChaosOptions& options) {
  v1::Study study;
  study.set_name(kStudy);
  v1::StudySpec& spec = *study.mutable_spec();
  for (int i = 0; i < 3; ++i) {
    v1::ParameterSpec* p = spec.add_parameters();
    p->set_name(absl::StrCat("x", i));
    p->mutable_double_spec()->set_min(0);
    p->mutable_double_spec()->set_max(1);
  }
  v1::ParameterSpec* act = spec.add_parameters();
  act->set_name("act");
  act->mutable_categorical_spec()->add_values("relu");
  act->mutable_categorical_spec()->add_values("tanh");
  v1::MetricSpec* metric = spec.add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  v1::Algorithm algorithm = v1::RANDOM;
  v1::Algorithm_Parse(options.algorithm, &algorithm);
  spec.set_algorithm(algorithm);
  spec.set_max_trials(options.trials);
  spec.set_lease_seconds(options.lease_seconds);
  spec.set_max_retries(options.max_retries);
  spec.set_seed(options.seed);
  return study;
}

// Starts `argv` as a child process that dies with the calling thread.
absl::StatusOr<pid_t> Spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// SIGKILLs `pid` and reaps it.
void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status))
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

// Acknowledged values of each trial, with the workers that were told.
using Acks = std::map<int64_t, std::map<double, std::vector<std::string>>>;

// Adds the acknowledgement lines "ID VALUE\n" of `path` from `*offset` on,
// and moves the offset past them. A last line without its newline (a worker
// killed while writing) is not an acknowledgement.
void ReadAcks(const std::string& path, size_t* offset, Acks* acks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(*offset));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    const std::string line = text.substr(start, end - start);
    char* rest = nullptr;
    const long long id = std::strtoll(line.c_str(), &rest, 10);
    const double value = std::strtod(rest, nullptr);
    (*acks)[id][value].push_back(fs::path(path).stem().string());
  }
  *offset += start;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// One worker process slot: its current process and the files of every
// process it has had.
struct Slot {
  int index = 0;
  int incarnation = 0;
  pid_t pid = -1;
  bool done = false;  // Its process exited 0: the study is COMPLETED.
  std::string client_id;
  std::vector<std::string> ack_files;
  std::vector<size_t> ack_offsets;
  std::vector<std::string> error_files;
};

class Experiment {
 public:
  explicit Experiment(const ChaosOptions& options)
      : options_(options), rng_(options.seed) {}
  // No worker outlives the experiment, however it ended.
  ~Experiment() {
    for (Slot& slot : slots_) {
      if (slot.pid > 0) KillAndReap(slot.pid);
    }
  }

  absl::StatusOr<ChaosResult> Run() {
    const Clock::time_point start = Clock::now();
    const int count = options_.db_url.empty() ? 1 : 2;
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<int> port = test::PickFreePort();
      if (!port.ok()) return port.status();
      test::ServerProcessOptions server;
      server.program = options_.hypertuned;
      server.db_path = options_.db_url.empty()
                           ? (fs::path(options_.dir) / "chaos.db").string()
                           : options_.db_url;
      server.listen = absl::StrCat("127.0.0.1:", *port);
      server_options_.push_back(server);
      servers_.emplace_back();
      // The first leads; the second waits as its standby.
      if (absl::Status s = StartServer(i); !s.ok()) return s;
    }
    std::vector<std::string> addresses;
    for (const test::ServerProcessOptions& s : server_options_) {
      addresses.push_back(s.listen);
    }
    server_list_ = absl::StrJoin(addresses, ",");

    ClientOptions admin_options;
    admin_options.server = server_list_;
    admin_options.client_id = "chaos-admin";
    admin_options.heartbeats = false;
    admin_options.call_timeout = milliseconds(5000);
    admin_.emplace(admin_options);
    if (auto created = admin_->CreateStudy(ChaosStudy(options_));
        !created.ok()) {
      return created.status();
    }

    slots_.resize(options_.workers);
    for (int i = 0; i < options_.workers; ++i) {
      slots_[i].index = i;
      if (absl::Status s = StartWorker(slots_[i]); !s.ok()) return s;
    }
    const Clock::time_point end = start + options_.duration;
    std::optional<Clock::time_point> next_server_kill =
        NextTimedKill(options_.server_kill_min, options_.server_kill_max);
    std::optional<Clock::time_point> next_worker_kill =
        NextTimedKill(options_.worker_kill_min, options_.worker_kill_max);
    size_t server_fraction = 0, worker_fraction = 0;

    while (true) {
      ReapWorkers();
      if (std::all_of(slots_.begin(), slots_.end(),
                      [](const Slot& s) { return s.done; })) {
        break;
      }
      if (Clock::now() >= end) break;
      const int64_t acknowledged = PollAcknowledged();
      const double progress =
          options_.trials > 0
              ? static_cast<double>(acknowledged) / options_.trials
              : 0.0;
      bool kill_server = false;
      if (server_fraction < options_.server_kills_at.size() &&
          progress >= options_.server_kills_at[server_fraction]) {
        ++server_fraction;
        kill_server = true;
      }
      if (next_server_kill && Clock::now() >= *next_server_kill) {
        next_server_kill =
            NextTimedKill(options_.server_kill_min, options_.server_kill_max);
        kill_server = true;
      }
      if (kill_server) {
        if (absl::Status s = KillServer(acknowledged); !s.ok()) return s;
      }
      bool kill_worker = false;
      if (worker_fraction < options_.worker_kills_at.size() &&
          progress >= options_.worker_kills_at[worker_fraction]) {
        ++worker_fraction;
        kill_worker = true;
      }
      if (next_worker_kill && Clock::now() >= *next_worker_kill) {
        next_worker_kill =
            NextTimedKill(options_.worker_kill_min, options_.worker_kill_max);
        kill_worker = true;
      }
      if (kill_worker) {
        if (absl::Status s = KillWorker(acknowledged); !s.ok()) return s;
      }
      std::this_thread::sleep_for(kPollEvery);
    }

    // Time is up (or the study is done): the workers still running stop.
    for (Slot& slot : slots_) {
      if (slot.pid > 0) {
        KillAndReap(slot.pid);
        slot.pid = -1;
      }
    }
    if (absl::Status s = Check(); !s.ok()) return s;
    result_.seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    return result_;
  }

 private:
  void Log(const std::string& line) {
    if (options_.log != nullptr)
      *options_.log << "chaos: " << line << std::endl;
  }

  std::optional<Clock::time_point> NextTimedKill(milliseconds min,
                                                 milliseconds max) {
    if (max.count() <= 0) return std::nullopt;
    std::uniform_int_distribution<int64_t> pick(min.count(),
                                                std::max(min, max).count());
    return Clock::now() + milliseconds(pick(rng_));
  }

  absl::Status StartServer(int i) {
    // The address is fixed; a moment after a kill the port may still be
    // held, so starting is retried briefly.
    absl::Status last;
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto server = test::ServerProcess::Start(server_options_[i]);
      if (server.ok()) {
        servers_[i] = *std::move(server);
        return absl::OkStatus();
      }
      last = server.status();
      std::this_thread::sleep_for(milliseconds(100));
    }
    return last;
  }

  // Whether server i answers calls (leads its database), asked once.
  bool Answers(int i) {
    ClientOptions probe;
    probe.server = server_options_[i].listen;
    probe.client_id = "chaos-probe";
    probe.heartbeats = false;
    probe.max_attempts = 1;
    probe.call_timeout = milliseconds(1000);
    return Client(probe).ListStudies().ok();
  }

  absl::Status KillServer(int64_t acknowledged) {
    // The leader: the one server, or the one of two that answers.
    int victim = 0;
    if (servers_.size() > 1 && !Answers(0)) victim = 1;
    servers_[victim]->Kill(SIGKILL);
    ++result_.server_kills;
    const Clock::time_point killed = Clock::now();
    if (servers_.size() > 1) {
      const int standby = 1 - victim;
      while (!Answers(standby)) {
        if (Clock::now() - killed > std::chrono::seconds(30)) {
          return absl::DeadlineExceededError(
              "chaos: the standby did not take over within 30 s");
        }
        std::this_thread::sleep_for(milliseconds(20));
      }
      const double ms =
          std::chrono::duration<double, std::milli>(Clock::now() - killed)
              .count();
      result_.takeover_ms.push_back(ms);
      Log(absl::StrFormat("standby took over in %.0f ms", ms));
    }
    // The outage itself, as chaos: workers meet a dead address meanwhile.
    std::this_thread::sleep_for(options_.server_downtime);
    if (absl::Status s = StartServer(victim); !s.ok()) return s;
    Log(absl::StrFormat(
        "server SIGKILLed (#%d, %d trials acknowledged), back in %d ms",
        result_.server_kills, acknowledged,
        std::chrono::duration_cast<milliseconds>(Clock::now() - killed)
            .count()));
    return absl::OkStatus();
  }

  absl::Status StartWorker(Slot& slot) {
    slot.client_id = absl::StrCat("w", slot.index, "-", slot.incarnation);
    const std::string base = (fs::path(options_.dir) / slot.client_id).string();
    slot.ack_files.push_back(base + ".acks");
    slot.ack_offsets.push_back(0);
    slot.error_files.push_back(base + ".errors");
    absl::StatusOr<pid_t> pid =
        Spawn({options_.worker, "--server", server_list_, "--study", kStudy,
               "--client-id", slot.client_id, "--acks", slot.ack_files.back(),
               "--errors", slot.error_files.back(), "--reports",
               absl::StrCat(options_.reports), "--report-ms",
               absl::StrCat(options_.report_ms)});
    if (!pid.ok()) return pid.status();
    slot.pid = *pid;
    return absl::OkStatus();
  }

  absl::Status KillWorker(int64_t acknowledged) {
    std::vector<Slot*> running;
    for (Slot& slot : slots_) {
      if (slot.pid > 0) running.push_back(&slot);
    }
    if (running.empty()) return absl::OkStatus();
    std::uniform_int_distribution<size_t> pick(0, running.size() - 1);
    Slot& victim = *running[pick(rng_)];
    KillAndReap(victim.pid);
    victim.pid = -1;
    ++result_.worker_kills;
    Log(absl::StrFormat("worker %s SIGKILLed (#%d, %d trials acknowledged)",
                        victim.client_id, result_.worker_kills, acknowledged));
    if (!options_.replace_killed_workers) {
      victim.done = true;  // Nothing more will run in this slot.
      return absl::OkStatus();
    }
    ++victim.incarnation;
    return StartWorker(victim);
  }

  // Notes workers that exited. One that exits 0 saw the study COMPLETED;
  // any other exit is a violation (and the slot gets a new process).
  void ReapWorkers() {
    for (Slot& slot : slots_) {
      if (slot.pid <= 0) continue;
      int status = 0;
      if (waitpid(slot.pid, &status, WNOHANG) != slot.pid) continue;
      slot.pid = -1;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        slot.done = true;
        continue;
      }
      result_.violations.push_back(
          absl::StrCat("worker ", slot.client_id,
                       " ended by itself: ", DescribeWaitStatus(status)));
      ++slot.incarnation;
      if (absl::Status s = StartWorker(slot); !s.ok()) {
        result_.violations.push_back(
            absl::StrCat("restarting worker ", slot.index, ": ", s.message()));
        slot.done = true;
      }
    }
  }

  // Distinct trials acknowledged so far.
  int64_t PollAcknowledged() {
    for (Slot& slot : slots_) {
      for (size_t i = 0; i < slot.ack_files.size(); ++i) {
        ReadAcks(slot.ack_files[i], &slot.ack_offsets[i], &acks_);
      }
    }
    return static_cast<int64_t>(acks_.size());
  }

  // Waits out the leases of trials whose workers are gone, then checks every
  // promise (chaos.h) and fills in the figures.
  absl::Status Check() {
    std::vector<std::string>& violations = result_.violations;
    // Read everything again from the start: the final word on acks.
    acks_.clear();
    for (Slot& slot : slots_) {
      for (size_t i = 0; i < slot.ack_files.size(); ++i) {
        size_t offset = 0;
        ReadAcks(slot.ack_files[i], &offset, &acks_);
      }
      for (const std::string& file : slot.error_files) {
        for (const std::string& line : ReadLines(file)) {
          ++result_.unexpected_errors;
          violations.push_back(absl::StrCat(
              "worker error (", fs::path(file).stem().string(), "): ", line));
        }
      }
    }

    // Poll until no trial is running, within a few lease periods (its
    // expiry is swept every 250 ms).
    const Clock::time_point deadline =
        Clock::now() + milliseconds(3000 * options_.lease_seconds + 5000);
    while (true) {
      auto running = admin_->ListAllTrials(
          kStudy, {v1::Trial::ACTIVE, v1::Trial::STOPPING});
      if (running.ok() && running->empty()) break;
      if (Clock::now() >= deadline) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
    auto trials = admin_->ListAllTrials(kStudy);
    if (!trials.ok()) return trials.status();
    auto study = admin_->GetStudy(kStudy);
    if (!study.ok()) return study.status();
    const int64_t now_ms = NowMs();
    result_.study_completed = study->state() == v1::Study::COMPLETED;

    std::map<int64_t, const v1::Trial*> by_id;
    int64_t expected_id = 1;
    int64_t retries = 0;
    for (const v1::Trial& t : *trials) {
      by_id[t.id()] = &t;
      const std::string name = absl::StrCat("trial ", t.id());
      if (t.id() != expected_id++) {
        violations.push_back(absl::StrCat(name, ": ids are not dense from 1"));
      }
      retries += t.retry_count();
      switch (t.state()) {
        case v1::Trial::COMPLETED:
          ++result_.completed;
          if (!t.final_measurement().metrics().contains("loss")) {
            violations.push_back(
                absl::StrCat(name, ": COMPLETED without loss"));
          }
          break;
        case v1::Trial::FAILED:
          ++result_.failed;
          if (t.retry_count() <= options_.max_retries) {
            violations.push_back(absl::StrCat(
                name, ": FAILED after ", t.retry_count(),
                " losses, under max_retries ", options_.max_retries));
          }
          break;
        case v1::Trial::ACTIVE:
        case v1::Trial::STOPPING:
          if (t.lease_expire_time_ms() <= now_ms) {
            violations.push_back(
                absl::StrCat(name, ": ", v1::Trial::State_Name(t.state()),
                             " with a lease that expired ",
                             now_ms - t.lease_expire_time_ms(), " ms ago"));
          }
          break;
        default:
          break;
      }
      if (t.state() != v1::Trial::FAILED &&
          t.retry_count() > options_.max_retries) {
        violations.push_back(absl::StrCat(name, ": retry_count ",
                                          t.retry_count(), " > max_retries ",
                                          options_.max_retries));
      }
    }
    result_.trials = static_cast<int64_t>(trials->size());
    result_.requeued = retries - result_.failed;

    if (result_.study_completed) {
      if (options_.trials > 0 && result_.trials != options_.trials) {
        violations.push_back(absl::StrCat("COMPLETED study has ",
                                          result_.trials, " trials, not ",
                                          options_.trials));
      }
      for (const v1::Trial& t : *trials) {
        if (t.state() != v1::Trial::COMPLETED &&
            t.state() != v1::Trial::FAILED &&
            t.state() != v1::Trial::INFEASIBLE &&
            t.state() != v1::Trial::STOPPED) {
          violations.push_back(absl::StrCat("trial ", t.id(), " is ",
                                            v1::Trial::State_Name(t.state()),
                                            " in a COMPLETED study"));
        }
      }
    } else if (options_.trials > 0) {
      Log("the study did not complete in time; checked what there is");
    }

    result_.acknowledged = static_cast<int64_t>(acks_.size());
    for (const auto& [id, values] : acks_) {
      const std::string name = absl::StrCat("trial ", id);
      const std::string told = absl::StrJoin(
          values, ", ", [](std::string* out, const auto& value_workers) {
            absl::StrAppendFormat(out, "%.17g to %s", value_workers.first,
                                  absl::StrJoin(value_workers.second, "+"));
          });
      if (values.size() > 1) {
        violations.push_back(
            absl::StrCat(name, ": acknowledged with ", values.size(),
                         " different values (completed twice): ", told));
      }
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        violations.push_back(absl::StrCat(name, ": acknowledged, not stored"));
        continue;
      }
      const v1::Trial& t = *it->second;
      if (t.state() != v1::Trial::COMPLETED) {
        violations.push_back(absl::StrCat(name, ": acknowledged, but ",
                                          v1::Trial::State_Name(t.state())));
        continue;
      }
      auto loss = t.final_measurement().metrics().find("loss");
      for (const auto& [value, workers] : values) {
        if (loss == t.final_measurement().metrics().end() ||
            loss->second != value) {
          violations.push_back(absl::StrFormat(
              "%s: acknowledged as %.17g to %s, stored as %s (epoch %d)", name,
              value, absl::StrJoin(workers, "+"),
              loss == t.final_measurement().metrics().end()
                  ? std::string("no loss")
                  : absl::StrFormat("%.17g", loss->second),
              t.lease_epoch()));
        }
      }
    }

    // A clean stop, then the file's own check.
    for (std::unique_ptr<test::ServerProcess>& server : servers_) {
      const int status = server->Kill(SIGTERM);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        violations.push_back(absl::StrCat("hypertuned did not stop cleanly: ",
                                          DescribeWaitStatus(status)));
      }
    }
    admin_.reset();
    storage::StoreOptions store_options;
    store_options.path = server_options_[0].db_path;
    auto store = storage::OpenStore(store_options);
    if (!store.ok()) {
      violations.push_back(
          absl::StrCat("reopening the database: ", store.status().message()));
    } else if (absl::Status integrity = (*store)->CheckIntegrity();
               !integrity.ok()) {
      violations.push_back(
          absl::StrCat("integrity check: ", integrity.message()));
    }
    return absl::OkStatus();
  }

  const ChaosOptions& options_;
  std::mt19937_64 rng_;
  // One server, or a leader and its standby (db_url).
  std::vector<test::ServerProcessOptions> server_options_;
  std::vector<std::unique_ptr<test::ServerProcess>> servers_;
  std::string server_list_;  // Their addresses, for clients.
  std::optional<Client> admin_;
  std::vector<Slot> slots_;
  Acks acks_;
  ChaosResult result_;
};

}  // namespace

absl::StatusOr<ChaosResult> RunChaos(const ChaosOptions& options) {
  if (options.workers < 1 || options.lease_seconds < 1 ||
      options.max_retries < 0 || options.trials < 0) {
    return absl::InvalidArgumentError(
        "chaos: workers and lease_seconds must be >= 1, max_retries and "
        "trials >= 0");
  }
  return Experiment(options).Run();
}

}  // namespace hypertune::bench
