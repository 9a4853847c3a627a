// The CSV form of a study's trials (RFC 4180), the one schema of the HTTP
// API's trials.csv and `hypertune trials --format csv`: a header of fixed
// columns,
// then one column per parameter spec ("param:NAME") and one per metric spec
// ("metric:NAME", the final measurement's value), then one row per trial.
// Fields holding a comma, double quote, CR or LF, or with leading or
// trailing blanks, are quoted, quotes doubled;
// lines end in CRLF. Numbers are written as numbers (-1.5, -0 keep their
// sign). A text field (client id, reasons, category values, names) that
// begins with = + - @ TAB or CR, which a spreadsheet would run as a formula,
// is written quoted behind a single quote ("'=1+2"), as OWASP advises for CSV
// injection; so is one that begins with a single quote followed by such a
// character or another quote, so that a reader that drops the guard's quote
// (`hypertune trials import`) gives back the text as it was.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_COMMON_TRIAL_CSV_H_
#define HYPERTUNE_COMMON_TRIAL_CSV_H_

#include <string>
#include <string_view>

#include "common/double_text.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune {

// Text `field` as a CSV field: quoted as RFC 4180 requires (unchanged when
// it needs no quotes), behind the formula guard "'" where it begins like a
// formula (see above).
std::string CsvField(std::string_view field);

// Whether text `field` is written behind the formula guard.
bool NeedsFormulaGuard(std::string_view field);

// Appends the header line of `study`'s trial table.
void AppendCsvHeader(const v1::Study& study, std::string* out);

// Appends `trial`'s line, its columns as AppendCsvHeader names them; absent
// parameters and metrics are empty fields.
void AppendCsvRow(const v1::Study& study, const v1::Trial& trial,
                  std::string* out);

}  // namespace hypertune

#endif  // HYPERTUNE_COMMON_TRIAL_CSV_H_
