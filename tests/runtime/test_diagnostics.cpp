// Note [Diagnostic rate]: collapsed records are always counted; stderr gets the first few and then
// summaries; a handler gets every message.
#include <gtest/gtest.h>

#include <string>

#include "npugraph/npugraph.hpp"
#include "support/diagnostics.hpp"

namespace {

namespace ng = npugraph;

int count_lines(const std::string& text, const std::string& part) {
  int n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// 5,000 records of a set signal used to print 4,999 lines.
TEST(Diagnostics, CollapsedRecordsAreCountedButStderrGetsOnlyTheFirstFew) {
  const ng::Stream s = ng::Stream::create();
  ng::ExternalEvent ev("flooded");
  const std::uint64_t total_before = ng::total_collapsed_records();
  testing::internal::CaptureStderr();
  for (int i = 0; i < 5000; ++i) ev.record(s);
  s.synchronize();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(ev.collapsed_records(), 4999u);
  EXPECT_EQ(ng::total_collapsed_records() - total_before, 4999u);
  // The first few of this kind this process printed, at most; then at most a summary per 5 s.
  EXPECT_LE(count_lines(err, "'flooded'"), 5) << err.substr(0, 2000);
  EXPECT_LE(count_lines(err, "\n"), 7) << err.substr(0, 2000);
}

TEST(Diagnostics, AHandlerReceivesEveryMessage) {
  ngtest::DiagnosticLog log;
  const ng::Stream s = ng::Stream::create();
  ng::ExternalEvent ev("handled");
  for (int i = 0; i < 300; ++i) ev.record(s);
  s.synchronize();
  EXPECT_EQ(ev.collapsed_records(), 299u);
  EXPECT_EQ(log.lines().size(), 299u);
  EXPECT_NE(log.lines().back().find("collapsed signal #299"), std::string::npos) << log.lines().back();
}

}  // namespace
