#include "dataset_yaml.hpp"

#include <yaml.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "args.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

// One parsed YAML document (libyaml's document API), freed on scope exit.
class YamlDocument {
 public:
  YamlDocument(const std::string& file) : file_(file) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!f) throw UsageError("--data " + file + ": cannot open it");
    yaml_parser_t parser;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f.get());
    const bool ok = yaml_parser_load(&parser, &doc_) != 0;
    std::string problem;
    if (!ok)
      problem = std::string(parser.problem ? parser.problem : "not YAML") + " at line " +
                std::to_string(parser.problem_mark.line + 1);
    yaml_parser_delete(&parser);
    if (!ok) throw UsageError("--data " + file + ": " + problem);
  }
  ~YamlDocument() { yaml_document_delete(&doc_); }
  YamlDocument(const YamlDocument&) = delete;
  YamlDocument& operator=(const YamlDocument&) = delete;

  yaml_node_t* root() { return yaml_document_get_root_node(&doc_); }
  yaml_node_t* node(int id) { return yaml_document_get_node(&doc_, id); }
  static std::string scalar(const yaml_node_t* n) {
    return std::string(reinterpret_cast<const char*>(n->data.scalar.value), n->data.scalar.length);
  }
  // The scalar text of node `id`; UsageError naming `what` when it is not a scalar.
  std::string text(int id, const std::string& what) {
    const yaml_node_t* n = node(id);
    if (!n || n->type != YAML_SCALAR_NODE) throw UsageError("--data " + file_ + ": " + what + " must be a string");
    return scalar(n);
  }

 private:
  std::string file_;
  yaml_document_t doc_;
};

int class_id(const std::string& file, const std::string& s) {
  char* end = nullptr;
  const long id = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || id < 0 || id > 100000)
    throw UsageError("--data " + file + ": names: '" + s + "' is not a class id (0, 1, ...)");
  return static_cast<int>(id);
}

std::vector<std::string> read_names(YamlDocument& doc, const yaml_node_t* n, const std::string& file) {
  std::vector<std::string> names;
  if (n->type == YAML_SEQUENCE_NODE) {
    for (yaml_node_item_t* it = n->data.sequence.items.start; it < n->data.sequence.items.top; ++it)
      names.push_back(doc.text(*it, "names[" + std::to_string(names.size()) + "]"));
  } else if (n->type == YAML_MAPPING_NODE) {
    for (yaml_node_pair_t* p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; ++p) {
      const size_t id = static_cast<size_t>(class_id(file, doc.text(p->key, "a names key")));
      if (names.size() <= id) names.resize(id + 1);
      names[id] = doc.text(p->value, "names[" + std::to_string(id) + "]");
    }
  } else {
    throw UsageError("--data " + file + ": names must be a list or a mapping of class id to name");
  }
  return names;
}

}  // namespace

Dataset read_dataset_yaml(const std::string& file) {
  YamlDocument doc(file);
  const yaml_node_t* root = doc.root();
  if (!root || root->type != YAML_MAPPING_NODE)
    throw UsageError("--data " + file + ": not a dataset file (a mapping with path, val and names)");
  std::string base;
  std::vector<std::string> val;
  Dataset ds;
  bool has_names = false;
  for (yaml_node_pair_t* p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; ++p) {
    const yaml_node_t* key = doc.node(p->key);
    if (!key || key->type != YAML_SCALAR_NODE) continue;
    const std::string k = YamlDocument::scalar(key);
    const yaml_node_t* v = doc.node(p->value);
    if (k == "path") {
      base = doc.text(p->value, "path");
    } else if (k == "val") {
      if (v && v->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t* it = v->data.sequence.items.start; it < v->data.sequence.items.top; ++it)
          val.push_back(doc.text(*it, "val[]"));
      } else {
        val.push_back(doc.text(p->value, "val"));
      }
    } else if (k == "names" && v) {
      ds.names = read_names(doc, v, file);
      has_names = true;
    }
  }
  if (val.empty() || val[0].empty()) throw UsageError("--data " + file + ": has no 'val' (the images to evaluate)");
  if (!has_names) throw UsageError("--data " + file + ": has no 'names' (the class names)");
  fs::path root_dir = fs::path(file).parent_path();
  if (!base.empty()) root_dir = fs::path(base).is_absolute() ? fs::path(base) : root_dir / base;
  for (const std::string& v : val)
    ds.val.push_back((fs::path(v).is_absolute() ? fs::path(v) : root_dir / v).lexically_normal().string());
  return ds;
}

std::vector<std::string> dataset_image_specs(const std::string& entry) {
  const fs::path root = fs::path(entry).parent_path();
  if (fs::path(entry).extension() != ".txt") return {entry};
  std::ifstream f(entry);
  if (!f) throw UsageError("--data: the image list " + entry + " cannot be read");
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    out.push_back(fs::path(line).is_absolute() ? line : (root / line).lexically_normal().string());
  }
  if (out.empty()) throw UsageError("--data: the image list " + entry + " names no images");
  return out;
}

}  // namespace yolocu::cli
