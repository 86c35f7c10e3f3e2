#include "classes_option.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace yolocu::cli {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool whole_number(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::strspn(s.c_str(), "0123456789") == s.size();
}

// Levenshtein distance, case-insensitive.
size_t edit_distance(const std::string& a0, const std::string& b0) {
  const std::string a = lower(a0), b = lower(b0);
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// "'person' (0), 'potted plant' (58)": the names closest to `name` (edit distance within a third of
// its length, at least 2, or containing it), best first, at most 4; empty when none is close.
std::string close_names(const std::string& name, const std::vector<std::string>& names) {
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, id)
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  for (size_t i = 0; i < names.size(); ++i) {
    const size_t d = edit_distance(name, names[i]);
    const bool contains = name.size() >= 3 && lower(names[i]).find(lower(name)) != std::string::npos;
    if (d <= limit || contains) scored.emplace_back(contains ? std::min(d, limit) : d, i);
  }
  std::stable_sort(scored.begin(), scored.end());
  std::string s;
  for (size_t k = 0; k < std::min<size_t>(scored.size(), 4); ++k)
    s += (k ? ", '" : "'") + names[scored[k].second] + "' (" + std::to_string(scored[k].second) + ")";
  return s;
}

}  // namespace

ClassSelection class_selection(const Args& args) {
  ClassSelection sel;
  for (const std::string& value : args.all("classes")) {
    const bool numbers = std::strspn(value.c_str(), "0123456789, ") == value.size();
    std::string v = value;
    if (numbers) std::replace(v.begin(), v.end(), ' ', ',');
    size_t start = 0;
    while (start <= v.size()) {
      const size_t comma = std::min(v.find(',', start), v.size());
      const std::string tok = trim(v.substr(start, comma - start));
      start = comma + 1;
      if (tok.empty()) continue;
      if (whole_number(tok)) sel.ids.push_back(std::atoi(tok.c_str()));
      else if (tok[0] == '-' && whole_number(tok.substr(1))) throw UsageError("--classes: class ids are >= 0");
      else sel.names.push_back(tok);
    }
  }
  return sel;
}

std::vector<int> class_ids_of(const std::vector<std::string>& names, const std::vector<std::string>& model_names) {
  std::vector<int> ids;
  for (const std::string& name : names) {
    auto it = std::find(model_names.begin(), model_names.end(), name);
    if (it == model_names.end()) {
      std::vector<size_t> folded;
      for (size_t i = 0; i < model_names.size(); ++i)
        if (lower(model_names[i]) == lower(name)) folded.push_back(i);
      if (folded.size() == 1) it = model_names.begin() + static_cast<std::ptrdiff_t>(folded[0]);
    }
    if (it != model_names.end()) {
      ids.push_back(static_cast<int>(it - model_names.begin()));
      continue;
    }
    const std::string close = close_names(name, model_names);
    std::string first;
    for (size_t i = 0; i < std::min<size_t>(model_names.size(), 6); ++i)
      first += (i ? ", " : "") + std::to_string(i) + " '" + model_names[i] + "'";
    throw UsageError("--classes: '" + name + "' is not a class of this model; " +
                     (close.empty() ? "its " + std::to_string(model_names.size()) + " classes are " + first +
                                          (model_names.size() > 6 ? ", ..." : "") +
                                          " (a PATH right after --classes needs a '/' or '.' in it to be read as one)"
                                    : "close names: " + close));
  }
  return ids;
}

std::shared_ptr<const Model> add_named_classes(const Args& args, const std::string& model_path, DetectorOptions& options) {
  const ClassSelection sel = class_selection(args);
  if (sel.names.empty()) return nullptr;
  LoadOptions lo;
  lo.max_memory = options.max_memory;  // parsing under the same budget as Detector::create's
  auto model = std::make_shared<const Model>(load_onnx(model_path, lo));
  const std::vector<std::string> names = model->class_names();
  if (names.empty())
    throw UsageError("--classes '" + sel.names[0] + "': " + model_path + " names no classes (no 'names' metadata): give class ids");
  for (int id : class_ids_of(sel.names, names)) options.postprocess.classes.push_back(id);
  return model;
}

std::unique_ptr<Detector> create_detector(const Args& args, const std::string& model_path, DetectorOptions options) {
  std::shared_ptr<const Model> model = add_named_classes(args, model_path, options);
  return model ? Detector::create(model, options) : Detector::create(model_path, options);
}

}  // namespace yolocu::cli
