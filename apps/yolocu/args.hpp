// Minimal command-line parsing for the yolocu CLI: --key value, --key=value, --flag, positionals.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace yolocu::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `flags`: options that take no value; every other --option takes one value (repeatable).
  Args(int argc, char** argv, int first, const std::vector<std::string>& flags,
       const std::vector<std::string>& valued);

  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::string require(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  double get_double(const std::string& name, double fallback) const;
  long get_int(const std::string& name, long fallback) const;
  // A byte count: a whole number with an optional K, M, G or T suffix (powers of 1024, e.g. 512M,
  // 8G); 0 when absent (the library's default).
  uint64_t get_bytes(const std::string& name) const;
  // Comma- or space-separated integers ("0,2 5"), all occurrences.
  std::vector<int> get_int_list(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, bool> flags_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace yolocu::cli
