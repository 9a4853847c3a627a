// The CSV form of a study's trials (RFC 4180), the one schema of the HTTP
// API's trials.csv and `hypertune trials --format csv`: a header of fixed
// columns,
// then one column per parameter spec ("param:NAME") and one per metric spec
// ("metric:NAME", the final measurement's value), then one row per trial.
// Fields holding a comma, double quote, CR or LF, or with leading or
// trailing blanks, are quoted, quotes doubled;
// lines end in CRLF.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_SERVICE_TRIAL_CSV_H_
#define HYPERTUNE_SERVICE_TRIAL_CSV_H_

#include <string>
#include <string_view>

#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// `field` quoted as RFC 4180 requires (unchanged when it needs no quotes).
std::string CsvField(std::string_view field);

// Appends the header line of `study`'s trial table.
void AppendCsvHeader(const v1::Study& study, std::string* out);

// Appends `trial`'s line, its columns as AppendCsvHeader names them; absent
// parameters and metrics are empty fields.
void AppendCsvRow(const v1::Study& study, const v1::Trial& trial,
                  std::string* out);

// The shortest decimal that reads back as `value` ("inf", "-inf", "nan"
// for the non-finite).
std::string FormatDouble(double value);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_TRIAL_CSV_H_
