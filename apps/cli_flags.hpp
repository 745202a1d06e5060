// The command-line apps' one flag parser: a table of flags (name, value, help, what it sets) from
// which both the parsing and the usage text come. A setter throws UsageError naming the flag, the
// value and the rule; the parser prints it above the usage and exits 2 (0 for --help).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace npugraph::apps {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

template <class Options>
struct Flag {
  const char* name;
  const char* value;  // "" : a switch, set with an empty value
  const char* help;
  std::function<void(Options&, const std::string&)> set;
};

// An integer (or a number) in [lo, hi], or a UsageError "FLAG = 'V': must be ...".
inline std::int64_t integer_flag(const std::string& flag, const std::string& v, std::int64_t lo, std::int64_t hi) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw UsageError(flag + " = '" + v + "': must be an integer");
  if (n < lo || n > hi)
    throw UsageError(flag + " = " + v + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return n;
}

inline double number_flag(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw UsageError(flag + " = '" + v + "': must be a number");
  return x;
}

// A value among `choices` ("a|b|c"), or a UsageError naming them.
inline const std::string& choice_flag(const std::string& flag, const std::string& v, const std::string& choices) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t bar = choices.find('|', start);
    if (choices.compare(start, bar == std::string::npos ? std::string::npos : bar - start, v) == 0) return v;
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  std::string rule;
  for (char c : choices) rule += c == '|' ? std::string(", ") : std::string(1, c);
  throw UsageError(flag + " = '" + v + "': must be one of " + rule);
}

template <class Options>
[[noreturn]] void usage(const char* program, const char* about, const std::vector<Flag<Options>>& flags,
                        const std::string& error) {
  std::string text = error.empty() ? "" : std::string(program) + ": " + error + "\n\n";
  text += std::string("usage: ") + program + " [flags]\n" + about + "\n";
  for (const Flag<Options>& f : flags) {
    std::string left = std::string("  ") + f.name + (*f.value ? std::string(" ") + f.value : "");
    if (left.size() < 30) left.resize(30, ' ');
    else left += "\n" + std::string(30, ' ');
    text += left + f.help + "\n";
  }
  std::fputs(text.c_str(), stderr);
  std::exit(error.empty() ? 0 : 2);
}

// Sets `o` from argv by the table; usage() on --help, an unknown flag, a missing value or a
// setter's UsageError.
template <class Options>
void parse_flags(int argc, char** argv, const char* program, const char* about,
                 const std::vector<Flag<Options>>& table, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage(program, about, table, "");
    const Flag<Options>* f = nullptr;
    for (const Flag<Options>& candidate : table)
      if (a == candidate.name) f = &candidate;
    if (!f) usage(program, about, table, "unknown argument '" + a + "'");
    std::string value;
    if (*f->value) {
      if (i + 1 >= argc) usage(program, about, table, a + " needs a value (" + f->value + ")");
      value = argv[++i];
    }
    try {
      f->set(o, value);
    } catch (const UsageError& e) {
      usage(program, about, table, e.what());
    }
  }
}

}  // namespace npugraph::apps
