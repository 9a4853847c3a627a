#include "testing/http_test_util.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "storage/open_store.h"

namespace hypertune::test {

std::string HttpReply::Header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (strcasecmp(key.c_str(), name.c_str()) == 0) return value;
  }
  return "";
}

HttpReply HttpGet(const std::string& address, const std::string& path,
                  const std::string& token) {
  httplib::Client client(absl::StrCat("http://", address));
  client.set_read_timeout(30, 0);
  httplib::Headers headers;
  if (!token.empty()) {
    headers.emplace("Authorization", absl::StrCat("Bearer ", token));
  }
  HttpReply reply;
  httplib::Result result = client.Get(path, headers);
  if (!result) return reply;
  reply.status = result->status;
  reply.body = result->body;
  for (const auto& [key, value] : result->headers) {
    reply.headers.emplace(key, value);
  }
  return reply;
}

HttpReply HttpPost(const std::string& address, const std::string& path,
                   const std::string& token, const std::string& body,
                   const std::string& content_type,
                   const std::multimap<std::string, std::string>& headers) {
  httplib::Client client(absl::StrCat("http://", address));
  client.set_read_timeout(30, 0);
  httplib::Headers all(headers.begin(), headers.end());
  if (!token.empty()) {
    all.emplace("Authorization", absl::StrCat("Bearer ", token));
  }
  // httplib's Post always names a content type; an empty one is sent as
  // no header at all.
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.headers = std::move(all);
  request.body = body;
  if (!content_type.empty()) request.set_header("Content-Type", content_type);
  HttpReply reply;
  httplib::Result result = client.send(request);
  if (!result) return reply;
  reply.status = result->status;
  reply.body = result->body;
  for (const auto& [key, value] : result->headers) {
    reply.headers.emplace(key, value);
  }
  return reply;
}

v1::Study MakeStudy(const std::string& name, const std::string& owner,
                    const std::vector<std::string>& categories,
                    const std::string& objective) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(
      R"pb(
        spec {
          parameters {
            name: "x"
            double_spec { min: -2 max: 2 }
          }
          parameters {
            name: "lr"
            double_spec { min: 1e-4 max: 1 scale: LOG }
          }
          parameters {
            name: "depth"
            integer_spec { min: 1 max: 6 }
          }
          algorithm: QUASI_RANDOM
        }
        state: ACTIVE
        create_time_ms: 1700000000000)pb",
      &study);
  study.set_name(name);
  study.set_owner(owner);
  v1::ParameterSpec* act = study.mutable_spec()->add_parameters();
  act->set_name("act");
  for (const std::string& c : categories) {
    act->mutable_categorical_spec()->add_values(c);
  }
  v1::MetricSpec* loss = study.mutable_spec()->add_metrics();
  loss->set_name(objective);
  loss->set_goal(v1::MetricSpec::MINIMIZE);
  v1::MetricSpec* acc = study.mutable_spec()->add_metrics();
  acc->set_name("acc");
  acc->set_goal(v1::MetricSpec::MAXIMIZE);
  return study;
}

std::vector<v1::Trial> MakeTrials(const v1::Study& study, int count,
                                  int measurements, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::string objective = study.spec().metrics(0).name();
  const auto& categories = study.spec().parameters(3).categorical_spec();
  std::vector<v1::Trial> trials;
  for (int i = 1; i <= count; ++i) {
    v1::Trial t;
    const double x = -2 + 4 * unit(rng);
    const double lr = std::pow(10.0, -4 + 4 * unit(rng));
    const int64_t depth = 1 + static_cast<int64_t>(rng() % 6);
    const std::string& act =
        categories.values(static_cast<int>(rng() % categories.values_size()));
    auto add = [&](const char* name) {
      v1::ParameterValue* p = t.add_parameters();
      p->set_name(name);
      return p;
    };
    add("x")->set_double_value(x);
    add("lr")->set_double_value(lr);
    add("depth")->set_int_value(depth);
    add("act")->set_string_value(act);
    const double loss =
        (x - 0.5) * (x - 0.5) + std::pow(std::log10(lr) + 2, 2) + 0.1 * depth;
    t.set_create_time_ms(1700000000000 + 1000 * i);
    t.set_start_time_ms(t.create_time_ms() + 10);
    t.set_client_id(absl::StrCat("worker-", i % 8));
    t.set_lease_epoch(1);
    const bool stopped = i % 7 == 0;
    const bool active = i % 11 == 0;
    const bool failed = i % 13 == 0;
    const int steps = stopped ? std::max(1, measurements / 2) : measurements;
    for (int s = 1; s <= steps && !failed; ++s) {
      v1::Measurement* m = t.add_measurements();
      m->set_step(s);
      m->set_elapsed_seconds(1.5 * s);
      (*m->mutable_metrics())[objective] = loss + 2.0 / s;
      (*m->mutable_metrics())["acc"] = 1.0 / (1.0 + loss + 2.0 / s);
    }
    if (failed) {
      t.set_state(v1::Trial::FAILED);
      t.set_failure_reason("lease expired");
    } else if (active) {
      t.set_state(v1::Trial::ACTIVE);
      t.set_lease_expire_time_ms(4000000000000);
    } else {
      t.set_state(stopped ? v1::Trial::STOPPED : v1::Trial::COMPLETED);
      if (t.measurements_size() > 0) {
        *t.mutable_final_measurement() =
            t.measurements(t.measurements_size() - 1);
      }
      t.set_end_time_ms(t.start_time_ms() + 5000);
    }
    trials.push_back(std::move(t));
  }
  return trials;
}

absl::Status WriteStudy(const std::string& db_path, const v1::Study& study,
                        const std::vector<v1::Trial>& trials) {
  storage::StoreOptions options;
  options.path = db_path;
  auto store = storage::OpenStore(options);
  if (!store.ok()) return store.status();
  if (absl::Status s = (*store)->CreateStudy(study); !s.ok()) return s;
  // In slices, as a server would have written them.
  for (size_t i = 0; i < trials.size(); i += 500) {
    std::vector<v1::Trial> slice(
        trials.begin() + i, trials.begin() + std::min(trials.size(), i + 500));
    auto created = (*store)->CreateTrials(study.name(), std::move(slice));
    if (!created.ok()) return created.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Trial>> WriteDashboardStudies(
    const std::string& db_path, const std::string& name,
    const std::string& owner, int trials, int measurements) {
  v1::Study study = MakeStudy(name, owner);
  v1::EarlyStoppingSpec* asha = study.mutable_spec()->mutable_early_stopping();
  asha->set_rule(v1::EarlyStoppingSpec::ASHA);
  asha->set_min_resource(1);
  asha->set_max_resource(27);
  asha->set_reduction_factor(3);
  std::vector<v1::Trial> written = MakeTrials(study, trials, measurements, 7);
  for (size_t i = 0; i < written.size(); ++i) {
    v1::Trial& t = written[i];
    const int id = static_cast<int>(i) + 1;
    if (id % 17 == 0 && t.state() == v1::Trial::COMPLETED) {
      t.set_state(v1::Trial::INFEASIBLE);
      t.clear_final_measurement();
      t.set_infeasible_reason("out of memory");
    }
    if (id == 5 && t.state() == v1::Trial::COMPLETED) {
      (*t.mutable_final_measurement()
            ->mutable_metrics())[study.spec().metrics(0).name()] =
          std::numeric_limits<double>::infinity();
    }
    if (id == 6 && t.state() == v1::Trial::COMPLETED) {
      (*t.mutable_final_measurement()
            ->mutable_metrics())[study.spec().metrics(0).name()] =
          std::numeric_limits<double>::quiet_NaN();
    }
  }
  if (absl::Status s = WriteStudy(db_path, study, written); !s.ok()) return s;
  v1::Study other = MakeStudy(name + "-b", owner);
  if (absl::Status s = WriteStudy(db_path, other, MakeTrials(other, 60, 4, 8));
      !s.ok()) {
    return s;
  }
  v1::Study infeasible = MakeStudy("all-infeasible", owner);
  std::vector<v1::Trial> bad = MakeTrials(infeasible, 12, 0, 9);
  for (size_t i = 0; i < bad.size(); ++i) {
    bad[i].set_state(v1::Trial::INFEASIBLE);
    bad[i].clear_final_measurement();
    bad[i].set_infeasible_reason(i % 3 == 0 ? "NaN loss" : "out of memory");
  }
  if (absl::Status s = WriteStudy(db_path, infeasible, bad); !s.ok()) return s;
  return written;
}

absl::Status WriteTokenFile(const std::string& path) {
  std::ofstream file(path);
  file << "# test tokens\n"
       << kAliceToken << " alice\n"
       << kBobToken << " bob\n";
  file.close();
  if (!file) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<service::Server>> StartHttpServer(
    const std::string& db_path, const std::string& token_file,
    const HttpServerExtras& extras) {
  service::ServerOptions options;
  options.db_path = db_path;
  options.listen = "127.0.0.1:0";
  options.http_listen = extras.http_listen;
  options.http_allow_writes = extras.allow_writes;
  options.log_root = extras.log_root;
  options.auth_token_file = token_file;
  options.service.default_algorithm = v1::QUASI_RANDOM;
  return service::Server::Start(options);
}

std::unique_ptr<v1::HyperTune::Stub> MakeStub(const std::string& address) {
  return v1::HyperTune::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

void Authorize(grpc::ClientContext* context, const std::string& token) {
  context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

}  // namespace hypertune::test
