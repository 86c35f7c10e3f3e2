// yolocu track --detections: the tracker alone over detections read from JSON lines (the format of
// yolocu detect --source --jsonl; docs/track.md), written back as JSON lines with track ids.
#include <cinttypes>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "json_out.hpp"
#include "track_commands.hpp"
#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"

namespace yolocu::cli {
namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) { throw Error(ErrorCode::kParse, where + ": " + what); }

double number(const Json& j, const std::string& where, const std::string& key) {
  if (!j.is_number()) bad(where, "\"" + key + "\" must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v)) bad(where, "\"" + key + "\" is not finite");
  return v;
}

int64_t whole(const Json& obj, const std::string& key, int64_t fallback, int64_t lo, const std::string& where) {
  if (!obj.contains(key)) return fallback;
  const Json& j = obj[key];
  if (!j.is_number_integer() || j.get<int64_t>() < lo)
    bad(where, "\"" + key + "\" must be a whole number >= " + std::to_string(lo));
  return j.get<int64_t>();
}

Detections read_detections(const Json& line, const std::string& where) {
  if (!line.contains("detections") || !line["detections"].is_array()) bad(where, "no \"detections\" array");
  Detections dets;
  for (const Json& d : line["detections"]) {
    if (!d.is_object()) bad(where, "a detection is not an object");
    if (!d.contains("box") || !d["box"].is_array() || d["box"].size() != 4) bad(where, "a detection without \"box\": [x1, y1, x2, y2]");
    if (!d.contains("confidence")) bad(where, "a detection without \"confidence\"");
    Detection o;
    o.x1 = static_cast<float>(number(d["box"][0], where, "box"));
    o.y1 = static_cast<float>(number(d["box"][1], where, "box"));
    o.x2 = static_cast<float>(number(d["box"][2], where, "box"));
    o.y2 = static_cast<float>(number(d["box"][3], where, "box"));
    o.confidence = static_cast<float>(number(d["confidence"], where, "confidence"));
    if (!d.contains("class_id")) bad(where, "a detection without \"class_id\"");
    const int64_t cls = whole(d, "class_id", 0, 0, where);
    if (cls > 100000) bad(where, "\"class_id\" beyond 100000");
    o.class_id = static_cast<int>(cls);
    dets.push_back(o);
  }
  return dets;
}

}  // namespace

int track_detections(const std::string& path, TrackStage& stage, const std::string& jsonl_path,
                     std::vector<std::string>& names, bool quiet) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, path + ": cannot open (--detections)");
  // --jsonl: a file is an AtomicFile (renamed over the target at the end), "-" streams to stdout
  std::unique_ptr<AtomicFile> out = jsonl_path == "-" ? nullptr : std::make_unique<AtomicFile>(jsonl_path);
  std::map<int64_t, int64_t> next_frame;  // per stream
  std::set<std::string> stems;
  std::string text;
  int64_t line_no = 0, frames = 0, objects = 0;
  {  // an unfinished --jsonl file is removed on an error (AtomicFile), a previous good one stays
    while (std::getline(in, text)) {
      ++line_no;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = path + " line " + std::to_string(line_no);
      Json line;
      try {
        line = Json::parse(text);
      } catch (const Json::parse_error& e) {
        bad(where, std::string("not JSON: ") + e.what());
      }
      if (!line.is_object()) bad(where, "not a JSON object");
      const int64_t stream = whole(line, "stream", 0, 0, where);
      if (stream > 1000000) bad(where, "\"stream\" beyond 1000000");
      if (!next_frame.count(stream) && line.contains("source") && line["source"].is_string()) {
        std::string stem = source_stems({line["source"].get<std::string>()})[0];  // the MOT file's name
        if (!stems.insert(stem).second) stem += "_" + std::to_string(stream);
        stage.name_stream(static_cast<int>(stream), stem);
      }
      const int64_t frame = whole(line, "frame", next_frame[stream], 0, where);
      next_frame[stream] = frame + 1;
      Detections dets = read_detections(line, where);
      for (size_t i = 0; i < dets.size(); ++i) {  // names for the output, where the input gives them
        const Json& d = line["detections"][i];
        const size_t cls = static_cast<size_t>(dets[i].class_id);
        if (!d.contains("class_name") || !d["class_name"].is_string()) continue;
        while (names.size() <= cls) names.push_back("class" + std::to_string(names.size()));
        names[cls] = d["class_name"].get<std::string>();
      }
      Warp2x3 warp{};
      const bool has_warp = line.contains("warp");
      if (has_warp) {
        if (!line["warp"].is_array() || line["warp"].size() != 6) bad(where, "\"warp\" must be 6 numbers (a 2x3 affine map)");
        for (size_t i = 0; i < 6; ++i) warp[i] = number(line["warp"][i], where, "warp");
      } else if (stage.needs_frames()) {
        bad(where, "no \"warp\": BoT-SORT's gmc_method needs the camera motion, which --detections cannot see; give a "
                   "\"warp\" per line or use a tracker file with gmc_method: none");
      }
      FrameJson extra;
      try {
        stage.track(static_cast<int>(stream), frame + 1, dets, extra, has_warp ? &warp : nullptr);
      } catch (const Error& e) {
        bad(where, e.what());
      }
      std::string s = "{";
      if (line.contains("source")) s += "\"source\": " + line["source"].dump() + ", ";
      s += "\"stream\": " + std::to_string(stream) + ", \"frame\": " + std::to_string(frame);
      for (const char* k : {"pts", "width", "height"})
        if (line.contains(k)) s += std::string(", \"") + k + "\": " + line[k].dump();
      s += ", \"detections\": [";
      for (size_t i = 0; i < dets.size(); ++i) {
        std::string d = detection_json(dets[i], names);
        d.insert(d.size() - 1, extra.object_members[i]);
        s += (i ? ", " : "") + d;
      }
      s += "]" + extra.line_members + "}\n";
      if (out) out->write(s);
      else write_stdout(s);
      ++frames;
      objects += static_cast<int64_t>(dets.size());
    }
    if (in.bad()) throw Error(ErrorCode::kIo, path + ": read failed");
    stage.finish();
  }
  if (out) out->commit();
  if (!quiet) std::fprintf(stderr, "%" PRId64 " frames from %zu streams, %" PRId64 " tracked objects\n", frames, next_frame.size(), objects);
  return 0;
}

}  // namespace yolocu::cli
