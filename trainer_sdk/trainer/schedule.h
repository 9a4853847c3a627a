// The learning-rate schedule: linear warmup then cosine decay, per step.
//
//   t < W:       lr * (t + 1) / W
//   W <= t < T:  lr * (1 + cos(pi * (t - W) / (T - W))) / 2
//   t >= T:      0
// with t the 0-based step, W = warmup steps, T = total steps. Warmup starts
// at lr / W rather than 0 so that the first step moves the weights.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_SCHEDULE_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_SCHEDULE_H_

#include <cstdint>

namespace hypertune::train {

struct Schedule {
  double lr = 0.1;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
};

// The learning rate of step `step` (0-based).
double LearningRate(const Schedule& schedule, int64_t step);

// Steps per epoch for `size` examples in full batches of batch_size (the
// trainer drops the short last batch: a batch of one breaks batch norm).
// REQUIRES: batch_size > 0.
int64_t StepsPerEpoch(int64_t size, int batch_size);

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_SCHEDULE_H_
