#include "service/rpc/curve_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/study_metrics.h"

namespace hypertune::service {

namespace {

// What ToCurves reads of `spec` ("" without an objective).
std::string ObjectiveOf(const v1::StudySpec& spec) {
  const StudyMetrics metrics(spec);
  if (metrics.objectives().empty()) return "";
  // Every objective and constraint, and how the rule reads them: what
  // ToCurves makes of a trial.
  const v1::EarlyStoppingSpec& es = spec.early_stopping();
  return absl::StrCat(absl::StrJoin(metrics.RequiredNames(), ","), ";",
                      es.multi_objective(), ";", es.stop_on_constraints(), ";",
                      es.promote_by_model());
}

// Whether a write that answered `status` may still have been stored (a
// commit whose outcome is unknown): the cache then reads the study again.
bool MayHaveLanded(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::shared_ptr<CurveCache::Study> CurveCache::Entry(const std::string& name) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Study>& entry = studies_[name];
  if (entry == nullptr) entry = std::make_shared<Study>();
  return entry;
}

std::shared_ptr<CurveCache::Study> CurveCache::Find(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = studies_.find(std::string(name));
  return it == studies_.end() ? nullptr : it->second;
}

void CurveCache::Forget(std::string_view name) {
  absl::MutexLock lock(&mu_);
  studies_.erase(std::string(name));
}

std::vector<optimizer::TrialCurve>::iterator CurveCache::CurveOf(
    std::vector<optimizer::TrialCurve>& curves, int64_t id) {
  return std::lower_bound(
      curves.begin(), curves.end(), id,
      [](const optimizer::TrialCurve& c, int64_t v) { return c.id < v; });
}

absl::Status CurveCache::Load(storage::StudyStore& store,
                              const v1::Study& study, Study& entry) {
  absl::StatusOr<std::vector<v1::Trial>> trials =
      store.ListTrials(study.name(), {});
  if (!trials.ok()) return trials.status();
  entry.spec = study.spec();
  entry.curves = {};
  entry.trials.clear();
  entry.curves.curves = ToCurves(entry.spec, *trials);
  for (const v1::Trial& trial : *trials) {
    entry.trials[trial.id()] = {trial.state(), trial.measurements_size()};
    entry.curves.parameters[trial.id()] = trial.parameters();
    if (trial.state() == v1::Trial::REQUESTED) ++entry.curves.requested;
  }
  entry.loaded = true;
  return absl::OkStatus();
}

void CurveCache::Put(Study& entry, const v1::Trial& trial) {
  Trial& kept = entry.trials[trial.id()];
  entry.curves.requested += (trial.state() == v1::Trial::REQUESTED) -
                            (kept.state == v1::Trial::REQUESTED);
  kept = {trial.state(), trial.measurements_size()};
  entry.curves.parameters[trial.id()] = trial.parameters();
  std::vector<optimizer::TrialCurve>& curves = entry.curves.curves;
  auto at = CurveOf(curves, trial.id());
  const bool had = at != curves.end() && at->id == trial.id();
  std::vector<optimizer::TrialCurve> made = ToCurves(entry.spec, {trial});
  if (made.empty()) {
    if (had) curves.erase(at);
  } else if (had) {
    *at = std::move(made.front());
  } else {
    curves.insert(at, std::move(made.front()));
  }
}

absl::Status CurveCache::Judge(storage::StudyStore& store,
                               const v1::Study& study, const v1::Trial& head,
                               const v1::Measurement* appended,
                               absl::FunctionRef<void(const Curves&)> judge) {
  std::shared_ptr<Study> entry = Entry(study.name());
  absl::MutexLock lock(&entry->mu);
  // A new spec may name another objective: its curves are made again.
  if (!entry->loaded || ObjectiveOf(entry->spec) != ObjectiveOf(study.spec())) {
    if (absl::Status s = Load(store, study, *entry); !s.ok()) return s;
  }
  // The judged trial as it will be stored: its state, and its stored curve
  // with the new point, put back as it was afterwards (the store has not
  // taken the report yet; its hook adds the point once it has).
  v1::Trial bare = head;
  bare.clear_measurements();
  if (appended != nullptr) *bare.add_measurements() = *appended;
  std::vector<optimizer::TrialCurve> made = ToCurves(entry->spec, {bare});
  std::vector<optimizer::TrialCurve>& curves = entry->curves.curves;
  auto at = CurveOf(curves, head.id());
  if (at == curves.end() || at->id != head.id()) {
    // Not among the curves (not stored as running): judged as it is.
    optimizer::TrialCurve curve;
    curve.id = head.id();
    if (!made.empty()) curve = made.front();
    curves.insert(at, std::move(curve));
    judge(entry->curves);
    curves.erase(CurveOf(curves, head.id()));
    return absl::OkStatus();
  }
  const optimizer::TrialCurve::Status status = at->status;
  const size_t points = at->points.size();
  const size_t metrics = at->metrics.size();
  if (!made.empty()) {
    at->status = made.front().status;
    at->points.insert(at->points.end(), made.front().points.begin(),
                      made.front().points.end());
    at->metrics.insert(at->metrics.end(), made.front().metrics.begin(),
                       made.front().metrics.end());
  }
  judge(entry->curves);
  at = CurveOf(curves, head.id());
  at->status = status;
  at->points.resize(points);
  at->metrics.resize(metrics);
  return absl::OkStatus();
}

void CurveCache::Stored(const v1::Trial& trial) {
  std::shared_ptr<Study> entry = Find(trial.study_name());
  if (entry == nullptr) return;
  absl::MutexLock lock(&entry->mu);
  // Not loaded yet: the load reads this write (it began after it).
  if (!entry->loaded) return;
  Put(*entry, trial);
}

void CurveCache::Appended(const v1::Trial& head,
                          const v1::Measurement& measurement, int64_t index) {
  std::shared_ptr<Study> entry = Find(head.study_name());
  if (entry == nullptr) return;
  absl::MutexLock lock(&entry->mu);
  if (!entry->loaded) return;
  auto kept = entry->trials.find(head.id());
  if (kept != entry->trials.end() && kept->second.measurements == index + 1) {
    return;  // The load read it already.
  }
  if (kept == entry->trials.end() || kept->second.measurements != index) {
    // Out of step (cannot happen while every write comes through here):
    // read again at the next judgement rather than judge on a wrong curve.
    entry->loaded = false;
    return;
  }
  entry->curves.requested += (head.state() == v1::Trial::REQUESTED) -
                             (kept->second.state == v1::Trial::REQUESTED);
  kept->second = {head.state(), index + 1};
  entry->curves.parameters[head.id()] = head.parameters();
  v1::Trial bare = head;
  bare.clear_measurements();
  *bare.add_measurements() = measurement;
  std::vector<optimizer::TrialCurve> made = ToCurves(entry->spec, {bare});
  std::vector<optimizer::TrialCurve>& curves = entry->curves.curves;
  auto at = CurveOf(curves, head.id());
  const bool had = at != curves.end() && at->id == head.id();
  if (made.empty()) {
    if (had) curves.erase(at);
    return;
  }
  if (!had) {
    // A curve that was not kept (its trial was not running) has lost its
    // earlier points: read it all again next time.
    entry->loaded = false;
    return;
  }
  at->status = made.front().status;
  at->points.insert(at->points.end(), made.front().points.begin(),
                    made.front().points.end());
  at->metrics.insert(at->metrics.end(), made.front().metrics.begin(),
                     made.front().metrics.end());
}

// ----- CurveTrackingStore -----

absl::Status CurveTrackingStore::CreateStudy(const v1::Study& study) {
  absl::Status status = store_->CreateStudy(study);
  if (status.ok()) cache_->Forget(study.name());
  return status;
}

absl::StatusOr<v1::Study> CurveTrackingStore::GetStudy(std::string_view name) {
  return store_->GetStudy(name);
}

absl::StatusOr<std::vector<v1::Study>> CurveTrackingStore::ListStudies() {
  return store_->ListStudies();
}

absl::Status CurveTrackingStore::UpdateStudy(const v1::Study& study) {
  return store_->UpdateStudy(study);
}

absl::Status CurveTrackingStore::ModifyStudy(
    std::string_view name, absl::FunctionRef<void(v1::Study&)> modify) {
  return store_->ModifyStudy(name, modify);
}

absl::Status CurveTrackingStore::DeleteStudy(std::string_view name) {
  absl::Status status = store_->DeleteStudy(name);
  // Forgotten whatever the outcome: a failed delete may still have landed.
  cache_->Forget(name);
  return status;
}

absl::StatusOr<std::vector<v1::Trial>> CurveTrackingStore::CreateTrials(
    std::string_view study_name, std::vector<v1::Trial> trials) {
  absl::StatusOr<std::vector<v1::Trial>> stored =
      store_->CreateTrials(study_name, std::move(trials));
  if (stored.ok()) {
    for (const v1::Trial& trial : *stored) cache_->Stored(trial);
  } else if (MayHaveLanded(stored.status())) {
    cache_->Forget(study_name);
  }
  return stored;
}

absl::StatusOr<v1::Trial> CurveTrackingStore::GetTrial(
    std::string_view study_name, int64_t trial_id) {
  return store_->GetTrial(study_name, trial_id);
}

absl::StatusOr<storage::StudyWithTrial> CurveTrackingStore::GetStudyWithTrial(
    std::string_view study_name, int64_t trial_id) {
  return store_->GetStudyWithTrial(study_name, trial_id);
}

absl::StatusOr<storage::StudyOverview> CurveTrackingStore::GetStudyOverview(
    std::string_view name, const std::vector<v1::Trial::State>& states) {
  return store_->GetStudyOverview(name, states);
}

absl::Status CurveTrackingStore::UpdateTrial(const v1::Trial& trial) {
  absl::Status status = store_->UpdateTrial(trial);
  if (status.ok()) cache_->Stored(trial);
  if (MayHaveLanded(status)) cache_->Forget(trial.study_name());
  return status;
}

absl::Status CurveTrackingStore::UpdateTrialIf(
    const v1::Trial& trial, const storage::TrialVersion& read) {
  absl::Status status = store_->UpdateTrialIf(trial, read);
  if (status.ok()) cache_->Stored(trial);
  if (MayHaveLanded(status)) cache_->Forget(trial.study_name());
  return status;
}

absl::StatusOr<storage::TrialHead> CurveTrackingStore::GetTrialHead(
    std::string_view study_name, int64_t trial_id) {
  return store_->GetTrialHead(study_name, trial_id);
}

absl::Status CurveTrackingStore::AppendMeasurement(
    const v1::Trial& head, const v1::Measurement& measurement,
    const storage::TrialVersion& read) {
  absl::Status status = store_->AppendMeasurement(head, measurement, read);
  // Where it went is not known here: the study's curves are read again.
  if (status.ok() || MayHaveLanded(status)) cache_->Forget(head.study_name());
  return status;
}

absl::Status CurveTrackingStore::AppendMeasurementAt(
    const v1::Trial& head, const v1::Measurement& measurement,
    const storage::TrialVersion& read, int64_t index) {
  absl::Status status = store_->AppendMeasurement(head, measurement, read);
  if (status.ok()) cache_->Appended(head, measurement, index);
  if (MayHaveLanded(status)) cache_->Forget(head.study_name());
  return status;
}

absl::Status CurveTrackingStore::RenewTrialLease(const v1::Trial& trial) {
  // Neither the state nor the measurements change: nothing to tell.
  return store_->RenewTrialLease(trial);
}

absl::StatusOr<std::vector<storage::TrialChange>>
CurveTrackingStore::ListTrialChanges(std::string_view study_name,
                                     int64_t after_sequence, int limit) {
  return store_->ListTrialChanges(study_name, after_sequence, limit);
}

absl::StatusOr<std::vector<v1::Trial>> CurveTrackingStore::ListTrials(
    std::string_view study_name, const storage::TrialQuery& query) {
  return store_->ListTrials(study_name, query);
}

absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
CurveTrackingStore::CountTrials(std::string_view study_name) {
  return store_->CountTrials(study_name);
}

absl::StatusOr<std::vector<v1::Trial>> CurveTrackingStore::ListTrialsInStates(
    const std::vector<v1::Trial::State>& states) {
  return store_->ListTrialsInStates(states);
}

absl::Status CurveTrackingStore::CheckIntegrity() {
  return store_->CheckIntegrity();
}

absl::Status CurveTrackingStore::Backup(const std::string& destination_path) {
  return store_->Backup(destination_path);
}

}  // namespace hypertune::service
