// How the page writes values for people: numbers (five significant digits,
// exponents for the very large and small, +-inf and NaN by name), a
// parameter's value of any kind, times (UTC), durations, device time and a
// trial's attempts. Pure functions, tested in node
// (dashboard/test/format_test.js).

// A number as the tables, tooltips and axes show it; '' when absent.
export function formatNumber(value) {
  if (value === undefined || value === null) return '';
  if (Number.isNaN(value)) return 'NaN';
  if (!Number.isFinite(value)) return value > 0 ? '+inf' : '-inf';
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  const a = Math.abs(value);
  return a >= 1e5 || a < 1e-3 ? value.toExponential(3)
                              : String(Number(value.toPrecision(5)));
}

// A number by formatNumber, a string (a category) as it is, absent as ''.
export function formatValue(value) {
  return typeof value === 'number' ? formatNumber(value) : (value ?? '');
}

// Milliseconds since the epoch as "YYYY-MM-DD hh:mm:ss" (UTC); '' for 0 or
// absent.
export function formatTime(ms) {
  return ms ? new Date(Number(ms)).toISOString().replace('T', ' ').slice(0, 19)
            : '';
}

// A duration in milliseconds as "4.2 s", "12 s", "3m 7s" or "2h 5m"; '' when
// absent or negative.
export function formatDuration(ms) {
  if (ms === null || ms === undefined || !(ms >= 0)) return '';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.round(s - 60 * m)}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m - 60 * h}m`;
}

// Device-seconds as "45 s (0.0125 device-hours)"; absent counts as 0.
export function formatDeviceTime(seconds) {
  const s = seconds === null || seconds === undefined || Number.isNaN(seconds)
      ? 0 : seconds;
  return `${formatNumber(s)} s (${formatNumber(s / 3600)} device-hours)`;
}

// An attempt of a trial as the page names it: "attempt 2", and with how it
// ended when it did: "attempt 1 (lease expired)".
export function attemptLabel(number, endReason = '') {
  return `attempt ${number}` + (endReason ? ` (${endReason})` : '');
}
