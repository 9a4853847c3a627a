#include "trainer_sdk/trainer/schedule.h"

#include <cmath>

namespace hypertune::train {

double LearningRate(const Schedule& s, int64_t step) {
  if (step < 0) return 0.0;
  if (step < s.warmup_steps) {
    return s.lr * double(step + 1) / double(s.warmup_steps);
  }
  if (step >= s.total_steps) return 0.0;
  const int64_t decay_steps = s.total_steps - s.warmup_steps;
  const double progress = double(step - s.warmup_steps) / double(decay_steps);
  return s.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

int64_t StepsPerEpoch(int64_t size, int batch_size) {
  return size / batch_size;
}

}  // namespace hypertune::train
