// hypertune-train: the reference trainer (ResNet on Fashion-MNIST, IDX files
// or ImageNet-style folders) as a hypertune client.
//
// Under `hypertune worker` ($HYPERTUNE_STUDY and $HYPERTUNE_TRIAL_ID set) or
// with --study, hyperparameters come from the trial (a parameter present in
// the trial overrides its flag), each epoch is reported as a measurement
// (step = epoch: val_accuracy, val_loss, train_loss), a checkpoint is written
// each epoch and its URI recorded on the trial, a trial carrying a checkpoint
// resumes from it, and the run stops early when the server says so. The
// final measurement adds train_seconds, images_per_second, device_seconds
// and parameter_count (for accuracy-against-size studies).
// A NaN/Inf loss or a device failure marks the trial infeasible.
//
// Otherwise it trains with the flags and prints the worker's stdout protocol,
// `hypertune: val_accuracy=... val_loss=... step=N`, after each epoch.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/double_text.h"
#include "trainer_sdk/hypertune.h"
#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/checkpoint.h"
#include "trainer_sdk/trainer/data/dataset.h"
#include "trainer_sdk/trainer/trainer.h"

namespace hypertune::train {
namespace {

constexpr char kUsage[] =
    "usage: hypertune-train [flags]\n"
    "  hyperparameters (a trial's parameter of the same name overrides):\n"
    "    --lr 0.1 --momentum 0.9 --weight_decay 5e-4 --batch_size 128\n"
    "    --label_smoothing 0.1 --width 16 --depth 1 --stages 3 --epochs 5\n"
    "    --warmup 0.5 (epochs) --nesterov true --seed 1\n"
    "  data:\n"
    "    --data fashion-mnist|idx|imagefolder  --data-dir DIR\n"
    "    --train-subset N (first N training examples)  --val-size N (10000)\n"
    "    idx: --data-dir holds "
    "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
    "    imagefolder: --data-dir holds train/ and val/; --image-size 224\n"
    "    --test (evaluate on the test set at the end)  --augment false|true "
    "(IDX data)\n"
    "  compute: --device cpu|cuda --threads N --gpu N --mixed-precision\n"
    "           --stem small|imagenet --eval-batch-size 256 --prefetch-threads "
    "1\n"
    "  trials: --study NAME (else $HYPERTUNE_STUDY under `hypertune worker`)\n"
    "          --checkpoint-dir DIR (default $TMPDIR/hypertune-train)\n";

// Flags as name -> value, names with '-' spelled '_'.
using Flags = std::map<std::string, std::string>;

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  static const char* kBoolFlags[] = {"test", "mixed_precision", "help"};
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\""));
    }
    arg = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    arg = absl::StrReplaceAll(arg, {{"-", "_"}});
    bool is_bool = false;
    for (const char* b : kBoolFlags) is_bool = is_bool || arg == b;
    if (!has_value) {
      if (is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", arg, ": missing value"));
      }
    }
    flags[arg] = value;
  }
  return flags;
}

// Typed flag access with defaults; collects the first error.
class FlagReader {
 public:
  explicit FlagReader(Flags flags) : flags_(std::move(flags)) {}

  std::string String(const std::string& name, const std::string& fallback) {
    used_.insert(name);
    auto it = flags_.find(name);
    return it == flags_.end() ? fallback : it->second;
  }
  double Double(const std::string& name, double fallback) {
    std::string v = String(name, "");
    double out = fallback;
    if (!v.empty() && !absl::SimpleAtod(v, &out)) Fail(name, v, "a number");
    return out;
  }
  int64_t Int(const std::string& name, int64_t fallback) {
    std::string v = String(name, "");
    int64_t out = fallback;
    if (!v.empty() && !absl::SimpleAtoi(v, &out)) Fail(name, v, "an integer");
    return out;
  }
  bool Bool(const std::string& name, bool fallback) {
    std::string v = String(name, "");
    bool out = fallback;
    if (!v.empty() && !absl::SimpleAtob(v, &out))
      Fail(name, v, "true or false");
    return out;
  }
  bool Has(const std::string& name) const { return flags_.count(name) > 0; }
  // Flags given but never read; `from_trial` names came from the trial.
  absl::Status Finish(const std::set<std::string>& from_trial) const {
    if (!error_.ok()) return error_;
    for (const auto& [name, value] : flags_) {
      if (used_.count(name) == 0) {
        return absl::InvalidArgumentError(
            from_trial.count(name) > 0
                ? absl::StrCat("trial parameter \"", name,
                               "\" is not a hypertune-train flag")
                : absl::StrCat("unknown flag --", name));
      }
    }
    return absl::OkStatus();
  }

 private:
  void Fail(const std::string& name, const std::string& value,
            const char* want) {
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(absl::StrCat(
          "--", name, ": expected ", want, ", got \"", value, "\""));
    }
  }
  Flags flags_;
  std::set<std::string> used_;
  absl::Status error_;
};

// A trial's parameter as a flag value string; nullopt if absent.
std::optional<std::string> TrialValue(const Trial& trial,
                                      const std::string& name) {
  for (const v1::ParameterValue& p : trial.parameters()) {
    if (p.name() != name && absl::StrReplaceAll(p.name(), {{"-", "_"}}) != name)
      continue;
    switch (p.value_case()) {
      case v1::ParameterValue::kDoubleValue:
        // Round-trippable: StrCat keeps only 6 significant digits.
        return DoubleText(p.double_value());
      case v1::ParameterValue::kIntValue:
        return absl::StrCat(p.int_value());
      case v1::ParameterValue::kStringValue:
        return p.string_value();
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

struct DataSets {
  std::shared_ptr<const data::Dataset> train, validation, test;
};

absl::StatusOr<DataSets> OpenData(FlagReader& flags, bool want_test) {
  const std::string kind = flags.String("data", "fashion-mnist");
  std::string dir = flags.String("data_dir", "");
  const int64_t subset = flags.Int("train_subset", -1);
  int64_t val_size = flags.Int("val_size", 10000);
  const int image_size = int(flags.Int("image_size", 224));
  // Off by default: 5-epoch budgets underfit, and random crops and flips
  // cost Fashion-MNIST accuracy there (90.3% test with, 92.0% without).
  const bool augment = flags.Bool("augment", false);
  DataSets sets;
  if (kind == "fashion-mnist" || kind == "idx") {
    if (dir.empty()) {
      if (kind == "idx")
        return absl::InvalidArgumentError("--data idx needs --data-dir");
      dir = data::kFashionMnistDir;
    }
    data::IdxOptions idx;
    if (!augment) {
      idx.crop_padding = 0;
      idx.flip = false;
    }
    absl::StatusOr<std::unique_ptr<data::Dataset>> base =
        data::OpenFashionMnist(dir, /*test_set=*/false, idx);
    if (!base.ok()) return base.status();
    std::shared_ptr<const data::Dataset> all = std::move(*base);
    val_size = std::min<int64_t>(val_size, all->size() / 6);
    absl::StatusOr<data::Split> split =
        data::HoldOutTail(all, val_size, subset);
    if (!split.ok()) return split.status();
    sets.train = split->train;
    sets.validation = split->validation;
    if (want_test) {
      absl::StatusOr<std::unique_ptr<data::Dataset>> test =
          data::OpenFashionMnist(dir, /*test_set=*/true, idx);
      if (!test.ok()) return test.status();
      sets.test = std::move(*test);
    }
  } else if (kind == "imagefolder") {
    if (dir.empty())
      return absl::InvalidArgumentError("--data imagefolder needs --data-dir");
    data::ImageFolderOptions options;
    options.image_size = image_size;
    absl::StatusOr<std::vector<std::string>> classes =
        data::ListClasses(dir + "/train");
    if (!classes.ok()) return classes.status();
    options.classes = *classes;
    auto train = data::OpenImageFolder(dir + "/train", options);
    if (!train.ok()) return train.status();
    std::shared_ptr<const data::Dataset> all = std::move(*train);
    if (subset >= 0) {
      auto part = data::Subset(all, 0, std::min<int64_t>(subset, all->size()));
      if (!part.ok()) return part.status();
      all = *part;
    }
    sets.train = all;
    auto val = data::OpenImageFolder(dir + "/val", options);
    if (!val.ok()) return val.status();
    sets.validation = std::move(*val);
    sets.test = want_test ? sets.validation : nullptr;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data: expected fashion-mnist, idx or imagefolder, got \"", kind,
        "\""));
  }
  return sets;
}

std::string PathFromUri(const std::string& uri) {
  constexpr char kFile[] = "file://";
  return uri.rfind(kFile, 0) == 0 ? uri.substr(sizeof(kFile) - 1) : uri;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "hypertune-train: %s\n", status.ToString().c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int Run(int argc, char** argv) {
  absl::StatusOr<Flags> parsed = ParseFlags(argc, argv);
  if (!parsed.ok()) {
    std::fputs(kUsage, stderr);
    return Fail(parsed.status());
  }
  if (parsed->count("help") > 0) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // The trial, when there is one.
  std::string study = parsed->count("study") ? (*parsed)["study"] : "";
  const char* env_study = std::getenv("HYPERTUNE_STUDY");
  const char* env_trial = std::getenv("HYPERTUNE_TRIAL_ID");
  if (study.empty() && env_study != nullptr && env_trial != nullptr)
    study = env_study;
  std::optional<Trial> trial;
  std::set<std::string> from_trial;
  if (!study.empty()) {
    Client client;
    absl::StatusOr<std::optional<Trial>> next = client.NextTrial(study);
    if (!next.ok()) return Fail(next.status());
    if (!next->has_value()) {
      std::printf("hypertune-train: study %s has no trial left\n",
                  study.c_str());
      return 0;
    }
    trial = std::move(**next);
    for (const v1::ParameterValue& p : trial->parameters()) {
      std::optional<std::string> v = TrialValue(*trial, p.name());
      if (!v.has_value()) continue;
      const std::string name = absl::StrReplaceAll(p.name(), {{"-", "_"}});
      (*parsed)[name] = *v;
      from_trial.insert(name);
    }
  }
  // Marks the trial infeasible (or just reports) and returns the exit code.
  auto infeasible = [&](const std::string& reason) {
    std::fprintf(stderr, "hypertune-train: infeasible: %s\n", reason.c_str());
    if (trial.has_value()) {
      absl::Status s = trial->MarkInfeasible(reason);
      if (!s.ok()) return Fail(s);
      return 0;
    }
    return 1;
  };

  FlagReader flags(std::move(*parsed));
  flags.String("study", "");
  TrainOptions options;
  options.lr = flags.Double("lr", options.lr);
  options.momentum = flags.Double("momentum", options.momentum);
  options.weight_decay = flags.Double("weight_decay", options.weight_decay);
  options.batch_size = int(flags.Int("batch_size", options.batch_size));
  options.label_smoothing =
      flags.Double("label_smoothing", options.label_smoothing);
  options.model.width = int(flags.Int("width", options.model.width));
  options.model.depth = int(flags.Int("depth", options.model.depth));
  options.epochs = int(flags.Int("epochs", options.epochs));
  options.warmup_epochs = flags.Double("warmup", options.warmup_epochs);
  options.nesterov = flags.Bool("nesterov", options.nesterov);
  options.seed = uint64_t(flags.Int("seed", int64_t(options.seed)));
  options.eval_batch_size =
      int(flags.Int("eval_batch_size", options.eval_batch_size));
  options.prefetch.threads =
      int(flags.Int("prefetch_threads", options.prefetch.threads));
  const bool want_test = flags.Bool("test", false);
  const std::string device = flags.String("device", "cpu");
  BackendOptions backend_options;
  backend_options.threads = int(flags.Int("threads", 0));
  backend_options.device = int(flags.Int("gpu", 0));
  backend_options.mixed_precision = flags.Bool("mixed_precision", false);
  const std::string data_kind = flags.String("data", "fashion-mnist");
  const std::string stem =
      flags.String("stem", data_kind == "imagefolder" ? "imagenet" : "small");
  if (stem != "small" && stem != "imagenet") {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--stem: expected small or imagenet, got \"", stem, "\"")));
  }
  options.model.imagenet_stem = stem == "imagenet";
  options.model.stages =
      int(flags.Int("stages", options.model.imagenet_stem ? 4 : 3));
  const char* tmp = std::getenv("TMPDIR");
  const std::string checkpoint_dir = flags.String(
      "checkpoint_dir",
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/hypertune-train"));
  absl::StatusOr<DataSets> sets = OpenData(flags, want_test);
  if (absl::Status s = flags.Finish(from_trial); !s.ok()) {
    std::fputs(kUsage, stderr);
    return Fail(s);
  }
  if (!sets.ok()) return Fail(sets.status());
  if (std::string invalid = ValidateTrainOptions(options); !invalid.empty()) {
    // Hyperparameters out of range are the trial's fault, not the program's.
    if (trial.has_value()) return infeasible(invalid);
    return Fail(absl::InvalidArgumentError(invalid));
  }

  std::string error;
  std::unique_ptr<Backend> backend =
      MakeBackend(device, backend_options, &error);
  if (backend == nullptr) return Fail(absl::FailedPreconditionError(error));

  // Resume from the trial's checkpoint, if it left one.
  std::optional<Checkpoint> resume;
  if (trial.has_value() && !trial->checkpoint_uri().empty()) {
    Checkpoint checkpoint;
    std::string problem =
        ReadCheckpoint(PathFromUri(trial->checkpoint_uri()), checkpoint);
    if (problem.empty()) {
      std::fprintf(stderr,
                   "hypertune-train: resuming trial %lld from epoch %lld\n",
                   static_cast<long long>(trial->id()),
                   static_cast<long long>(checkpoint.epoch));
      resume = std::move(checkpoint);
    } else {
      std::fprintf(stderr, "hypertune-train: ignoring checkpoint: %s\n",
                   problem.c_str());
    }
  }
  std::string checkpoint_path;
  if (trial.has_value()) {
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_dir, ec);
    if (ec) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-dir ", checkpoint_dir, ": ", ec.message())));
    }
    checkpoint_path =
        std::filesystem::absolute(
            std::filesystem::path(checkpoint_dir) /
            absl::StrCat(trial->study(), "-trial-", trial->id(), ".ckpt"))
            .string();
  } else if (flags.Has("checkpoint_dir")) {
    std::error_code ec;
    std::filesystem::create_directories(checkpoint_dir, ec);
    checkpoint_path =
        (std::filesystem::path(checkpoint_dir) / "last.ckpt").string();
  }

  absl::Status lease_error;
  TrainCallbacks callbacks;
  callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) -> absl::Status {
    if (checkpoint_path.empty()) return absl::OkStatus();
    std::string problem = WriteCheckpoint(checkpoint_path, checkpoint);
    if (!problem.empty()) return absl::InternalError(problem);
    if (trial.has_value()) {
      absl::Status s = trial->SetCheckpoint("file://" + checkpoint_path);
      if (!s.ok())
        std::fprintf(stderr, "hypertune-train: SetCheckpoint: %s\n",
                     s.ToString().c_str());
    }
    return absl::OkStatus();
  };
  callbacks.on_epoch = [&](const EpochReport& r) {
    std::fprintf(stderr,
                 "epoch %lld: train_loss %.4f train_acc %.4f val_loss %.4f "
                 "val_acc %.4f lr %.4g (%.1f s)\n",
                 static_cast<long long>(r.epoch), r.train_loss,
                 r.train_accuracy, r.val_loss, r.val_accuracy, r.lr, r.seconds);
    if (!trial.has_value()) {
      std::printf(
          "hypertune: val_accuracy=%.6f val_loss=%.6f train_loss=%.6f "
          "step=%lld\n",
          r.val_accuracy, r.val_loss, r.train_loss,
          static_cast<long long>(r.epoch));
      std::fflush(stdout);
      return true;
    }
    absl::Status s = trial->Report(r.epoch, {{"val_accuracy", r.val_accuracy},
                                             {"val_loss", r.val_loss},
                                             {"train_loss", r.train_loss}});
    if (!s.ok()) {
      lease_error = s;
      return false;
    }
    // The report's answer carries the rule's decision on this very epoch
    // (and heartbeats any later one): no separate CheckEarlyStopping.
    return !trial->should_stop();
  };

  std::unique_ptr<Model> model;
  absl::StatusOr<TrainResult> result =
      Train(options, *backend, *sets->train, *sets->validation,
            resume.has_value() ? &*resume : nullptr, callbacks, &model);
  if (!result.ok()) return Fail(result.status());
  if (!lease_error.ok())
    return Fail(lease_error);  // the trial is no longer ours
  if (result->outcome == TrainResult::Outcome::kDiverged ||
      result->outcome == TrainResult::Outcome::kDeviceError) {
    return infeasible(result->reason);
  }
  EpochReport last = result->last;
  if (last.epoch == 0 && resume.has_value()) {  // resumed after the last epoch
    last.epoch = resume->epoch;
    last.val_accuracy = resume->metadata["val_accuracy"];
    last.val_loss = resume->metadata["val_loss"];
  }
  Metrics final_metrics = {{"val_accuracy", last.val_accuracy},
                           {"val_loss", last.val_loss},
                           {"train_seconds", result->train_seconds},
                           {"images_per_second", result->images_per_second},
                           {"device_seconds", result->device_seconds}};
  // What a size/speed trade-off study needs beside images_per_second.
  if (model != nullptr) {
    final_metrics["parameter_count"] =
        static_cast<double>(model->Size(ModelArray::kParameters));
  }
  if (want_test && sets->test != nullptr && model != nullptr) {
    absl::StatusOr<EvalStats> test = EvaluateDataset(
        *model, *sets->test, options.eval_batch_size, options.prefetch);
    if (!test.ok()) return Fail(test.status());
    final_metrics["test_accuracy"] = double(test->correct) / test->count;
    final_metrics["test_loss"] = test->loss_sum / test->count;
    std::fprintf(stderr, "test_accuracy %.4f test_loss %.4f\n",
                 final_metrics["test_accuracy"], final_metrics["test_loss"]);
  }
  std::fprintf(stderr,
               "trained %lld images in %.1f s (%.1f images/s in steps)\n",
               static_cast<long long>(result->images), result->train_seconds,
               result->images_per_second);
  if (trial.has_value()) {
    absl::Status s = trial->Complete(final_metrics);
    if (!s.ok()) return Fail(s);
    return 0;
  }
  std::string line = "hypertune:";
  for (const auto& [name, value] : final_metrics)
    absl::StrAppend(&line, " ", name, "=", value);
  std::printf("%s step=%lld\n", line.c_str(),
              static_cast<long long>(last.epoch));
  return 0;
}

}  // namespace
}  // namespace hypertune::train

int main(int argc, char** argv) { return hypertune::train::Run(argc, argv); }
