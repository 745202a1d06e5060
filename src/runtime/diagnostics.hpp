// Runtime diagnostics: collapsed ExternalEvent records and stalled waits.
//
// Note [Diagnostic rate]
// A diagnostic goes to the handler the user set (set_diagnostic_handler: every message, unthrottled),
// or else to stderr, throttled per kind: the first kFirstPrinted messages of a kind are printed, then
// at most one summary line per kSummaryEvery saying how many were not printed. A racing update loop
// can collapse hundreds of thousands of records; each one is still counted (ExternalEvent::
// collapsed_records, total_collapsed_records), only the printing is throttled. What is left unprinted
// at exit is summarised then.
#pragma once

#include <chrono>
#include <string>

namespace npugraph::detail {

enum class DiagnosticKind { collapsed_record, stall };

inline constexpr int kFirstPrinted = 5;
inline constexpr auto kSummaryEvery = std::chrono::seconds(5);

void diagnose(DiagnosticKind kind, const std::string& message);

// A log line (npugraph/trace.hpp): to the handler when one is set, else to stderr; not throttled.
void deliver_log(const std::string& message);

// Counts every collapsed record of every ExternalEvent (for total_collapsed_records()).
void count_collapsed_record();

}  // namespace npugraph::detail
