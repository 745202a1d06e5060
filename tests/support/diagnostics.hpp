// ngtest::DiagnosticLog: collects the runtime's diagnostics (collapsed records, stalls) for the
// scope of a test.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "npugraph/npugraph.hpp"

namespace ngtest {

class DiagnosticLog {
 public:
  DiagnosticLog() {
    npugraph::set_diagnostic_handler([this](const std::string& m) {
      std::lock_guard lock(mu_);
      lines_.push_back(m);
    });
  }
  ~DiagnosticLog() { npugraph::set_diagnostic_handler(nullptr); }
  DiagnosticLog(const DiagnosticLog&) = delete;
  DiagnosticLog& operator=(const DiagnosticLog&) = delete;
  std::vector<std::string> lines() const {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace ngtest
