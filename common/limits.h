// What one request may carry and one study or trial may hold. Every limit
// is enforced with INVALID_ARGUMENT naming the field and the limit
// (validation.h); docs/limits.md lists them all.
//
// Sizes are chosen so that no answer is larger than gRPC's default receive
// limit (4 MiB): a trial is at most 1 MiB, a study at most 1 MiB, and lists
// stop a page before it would pass kMaxResponseBytes. So a client with
// default settings never gets RESOURCE_EXHAUSTED for a write that committed.
#ifndef HYPERTUNE_COMMON_LIMITS_H_
#define HYPERTUNE_COMMON_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace hypertune {

// Messages: the largest request the server reads, and the largest answer it
// builds (both gRPC's default receive limit).
inline constexpr int kMaxRequestBytes = 4 << 20;
inline constexpr size_t kMaxResponseBytes = 4 << 20;

// Studies.
inline constexpr size_t kMaxNameBytes = 128;  // study, parameter, metric
inline constexpr int kMaxParameters = 500;
inline constexpr int kMaxValuesPerParameter = 1000;  // categories, numbers
inline constexpr size_t kMaxCategoryBytes = 1024;
// Conditions: parent_categories and parent_values, in all over a study's
// parameters. Bounds the conditional tree (categories x children, else
// bounded by the study's bytes alone), which the GP bandit's models each
// hold and index: at the limit (499 children under 20 of 1,000 categories
// each) a suggestion takes ~0.35 s of CPU, 21 s before issue 31's fix.
inline constexpr int kMaxParentValuesPerStudy = 10'000;
inline constexpr int kMaxMetricsPerStudy = 100;
inline constexpr int kMaxPriorStudies = 8;         // StudySpec.prior_studies
inline constexpr size_t kMaxStudyBytes = 1 << 20;  // serialized
inline constexpr int kMaxStudyChanges = 1000;      // UpdateStudy's record
// Values a recorded change lists (values added to a parameter).
inline constexpr size_t kMaxChangeTextBytes = 1024;
inline constexpr int32_t kMaxLeaseSeconds = 24 * 3600;
inline constexpr int32_t kMaxRetries = 1000;  // and max_preemptions
// Preemptions a trial survives when its study sets no max_preemptions.
inline constexpr int32_t kDefaultMaxPreemptions = 100;
inline constexpr size_t kMaxOwnerBytes = 128;
// Study and trial attributes: entries, and bytes per value (keys are names).
inline constexpr int kMaxAttributes = 64;
inline constexpr size_t kMaxAttributeValueBytes = 4096;

// Trials.
inline constexpr int kMaxMetricsPerMeasurement = 200;
inline constexpr int kMaxMeasurementsPerTrial = 10'000;
inline constexpr size_t kMaxTrialBytes = 1 << 20;  // serialized
inline constexpr size_t kMaxClientIdBytes = 256;
inline constexpr size_t kMaxUriBytes = 4096;  // checkpoint URI, log path
inline constexpr size_t kMaxReasonBytes = 4096;
// Device-seconds one grant of a trial may report: 1,024 devices for a year.
// Totals of plausible reports stay finite.
inline constexpr double kMaxGrantDeviceSeconds = 1024.0 * 366 * 24 * 3600;

// Calls.
inline constexpr int kMaxSuggestCount = 1000;
// WatchTrials streams open at once, in all and per owner (an idle one
// holds no thread, but a batch of up to 500 trials while it is written;
// the HTTP event feeds have limits of their own).
inline constexpr int kMaxWatchStreams = 4096;
inline constexpr int kMaxWatchStreamsPerOwner = 64;
// ImportStudy streams read at once (each is held in memory until stored),
// in all and per owner (with auth off, per client host), so that one
// owner's stalled imports never block another's.
inline constexpr int kMaxConcurrentImports = 4;
inline constexpr int kMaxConcurrentImportsPerOwner = 2;
// An ImportStudy stream silent this long between messages is cancelled,
// giving its place back.
inline constexpr int kImportIdleSeconds = 30;
inline constexpr int kMaxPageSize = 1000;
// The HTTP change feed's compact view (the dashboard's bulk read; HTTP has
// no 4 MiB answer limit): a page of 10,000 trials is about 5 MB.
inline constexpr int kMaxCompactPageSize = 10'000;

}  // namespace hypertune

#endif  // HYPERTUNE_COMMON_LIMITS_H_
