// Checkpoint: everything a run needs to resume exactly where an epoch ended:
// the model configuration, parameters, momentum buffers, BN running
// statistics, the epoch and step counters and the run's seed (the data order
// and augmentation of epoch e are pure functions of (seed, e)).
//
// File format (little-endian): "HTCKPT\0\0", u32 version (1), the config as
// 8 x i32, i64 epoch, i64 step, u64 seed, three float arrays (u64 count +
// values: parameters, velocity, running stats), u32 count of metadata
// entries (u32 length + name bytes + f64 value), then u64 FNV-1a of every
// byte before it. Writes go to PATH.tmp, are fsynced, then renamed over
// PATH, so a reader sees the old file or the new one, never a torn one.
//
// Thread safety: pure functions; concurrent writers to one path race.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_CHECKPOINT_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer_sdk/trainer/model.h"

namespace hypertune::train {

struct Checkpoint {
  ModelConfig config;
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps taken
  uint64_t seed = 0;
  std::vector<float> parameters;
  std::vector<float> velocity;
  std::vector<float> running_stats;
  // Free-form numbers (e.g. the last val_accuracy, hyperparameters).
  std::map<std::string, double> metadata;
};

// Fills parameters, velocity and running stats (and config) from `model`.
void CaptureModel(const Model& model, Checkpoint& checkpoint);
// Loads a checkpoint's arrays into `model`. Returns "" or why it does not
// fit (config mismatch, array size).
std::string RestoreModel(const Checkpoint& checkpoint, Model& model);

// Encodes/decodes the file format above. Decode returns "" or the problem
// (bad magic, unsupported version, truncated, checksum mismatch).
std::string EncodeCheckpoint(const Checkpoint& checkpoint);
std::string DecodeCheckpoint(const std::string& bytes, Checkpoint& checkpoint);

// Atomic write (temp file + fsync + rename + directory fsync) and read.
// Return "" on success, else the problem naming the path.
std::string WriteCheckpoint(const std::string& path,
                            const Checkpoint& checkpoint);
std::string ReadCheckpoint(const std::string& path, Checkpoint& checkpoint);

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_CHECKPOINT_H_
