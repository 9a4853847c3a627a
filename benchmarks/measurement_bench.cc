// The time of one AddMeasurement as a trial's curve grows (issue 48 item
// 10): against a running hypertuned, over gRPC, in a study with the median
// early-stopping rule (so that each report is judged) and FINISHED finished
// trials of 100 measurements each, one trial reports MEASUREMENTS
// measurements, each call timed. Prints one JSON line per checkpoint (100,
// 1,000, 5,000 and 10,000 measurements): the median and 90th percentile of
// the 50 calls that end there.
//
//   hypertune_measurement_bench HOST:PORT [MEASUREMENTS=10000] [FINISHED=20]
//
// benchmarks/measurement_bench.sh starts the server(s). A benchmark: it
// measures, never asserts.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "hypertune/v1/hypertune.grpc.pb.h"

namespace v1 = ::hypertune::v1;

namespace {

constexpr char kStudy[] = "measurement-bench";
constexpr int kWindow = 50;

void Check(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return;
  std::cerr << what << ": " << status.error_message() << "\n";
  std::exit(1);
}

v1::Trial Suggest(v1::HyperTune::Stub& stub) {
  grpc::ClientContext context;
  v1::SuggestTrialsRequest request;
  request.set_study_name(kStudy);
  request.set_count(1);
  request.set_client_id("bench");
  v1::SuggestTrialsResponse response;
  Check(stub.SuggestTrials(&context, request, &response), "SuggestTrials");
  if (response.trials_size() != 1) {
    std::cerr << "SuggestTrials gave " << response.trials_size() << " trials\n";
    std::exit(1);
  }
  return response.trials(0);
}

grpc::Status Report(v1::HyperTune::Stub& stub, const v1::Trial& trial,
                    int64_t step, double accuracy) {
  grpc::ClientContext context;
  v1::AddMeasurementRequest request;
  request.set_study_name(kStudy);
  request.set_trial_id(trial.id());
  request.set_lease_epoch(trial.lease_epoch());
  v1::Measurement* m = request.mutable_measurement();
  m->set_step(step);
  m->set_elapsed_seconds(static_cast<double>(step));
  (*m->mutable_metrics())["accuracy"] = accuracy;
  (*m->mutable_metrics())["loss"] = 1 - accuracy;
  v1::Trial response;
  return stub.AddMeasurement(&context, request, &response);
}

void Complete(v1::HyperTune::Stub& stub, const v1::Trial& trial,
              double accuracy) {
  grpc::ClientContext context;
  v1::CompleteTrialRequest request;
  request.set_study_name(kStudy);
  request.set_trial_id(trial.id());
  request.set_lease_epoch(trial.lease_epoch());
  (*request.mutable_final_measurement()->mutable_metrics())["accuracy"] =
      accuracy;
  v1::Trial response;
  Check(stub.CompleteTrial(&context, request, &response), "CompleteTrial");
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(p * (values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0]
              << " HOST:PORT [MEASUREMENTS=10000] [FINISHED=20]\n";
    return 2;
  }
  const std::string target = argv[1];
  const int measurements = argc > 2 ? std::atoi(argv[2]) : 10'000;
  const int finished = argc > 3 ? std::atoi(argv[3]) : 20;
  grpc::ChannelArguments arguments;
  // The old server answered with the whole trial: up to 1 MiB and more.
  arguments.SetMaxReceiveMessageSize(64 << 20);
  std::unique_ptr<v1::HyperTune::Stub> stub =
      v1::HyperTune::NewStub(grpc::CreateCustomChannel(
          target, grpc::InsecureChannelCredentials(), arguments));

  {
    grpc::ClientContext context;
    v1::CreateStudyRequest request;
    v1::Study* study = request.mutable_study();
    study->set_name(kStudy);
    v1::StudySpec* spec = study->mutable_spec();
    v1::ParameterSpec* lr = spec->add_parameters();
    lr->set_name("lr");
    lr->mutable_double_spec()->set_min(1e-4);
    lr->mutable_double_spec()->set_max(1e-1);
    v1::MetricSpec* metric = spec->add_metrics();
    metric->set_name("accuracy");
    metric->set_goal(v1::MetricSpec::MAXIMIZE);
    spec->set_algorithm(v1::RANDOM);
    spec->mutable_early_stopping()->set_rule(v1::EarlyStoppingSpec::MEDIAN);
    v1::Study created;
    Check(stub->CreateStudy(&context, request, &created), "CreateStudy");
  }
  // Finished trials below the measured one, so that the rule judges each
  // report and lets it go on.
  for (int i = 0; i < finished; ++i) {
    const v1::Trial trial = Suggest(*stub);
    for (int step = 1; step <= 100; ++step) {
      Check(Report(*stub, trial, step, 0.5 * step / 100.0), "AddMeasurement");
    }
    Complete(*stub, trial, 0.5);
  }

  const v1::Trial trial = Suggest(*stub);
  std::vector<double> ms;
  ms.reserve(measurements);
  for (int step = 1; step <= measurements; ++step) {
    const auto start = std::chrono::steady_clock::now();
    Check(Report(*stub, trial, step, 0.6 + 0.3 * step / measurements),
          "AddMeasurement");
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  for (int at : {100, 1'000, 5'000, 10'000}) {
    if (at > measurements) break;
    std::vector<double> window(ms.begin() + (at - kWindow), ms.begin() + at);
    std::printf(
        "{\"measurements\": %d, \"median_ms\": %.3f, \"p90_ms\": %.3f}\n", at,
        Percentile(window, 0.5), Percentile(window, 0.9));
  }
  return 0;
}
