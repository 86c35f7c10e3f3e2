// ultralytics' default tracker files by name (bytetrack.yaml, botsort.yaml) and the lookup of a
// --tracker / yolocu.Tracker argument: a file when one exists at that path, else a default by name.
#include <sys/stat.h>

#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace yolocu {

// The settings of ultralytics 8.4.190's cfg/trackers/bytetrack.yaml and botsort.yaml.
std::string default_tracker_yaml(const std::string& name) {
  static const char* const kByteTrack =
      "tracker_type: bytetrack\n"
      "track_high_thresh: 0.25\n"
      "track_low_thresh: 0.1\n"
      "new_track_thresh: 0.25\n"
      "track_buffer: 30\n"
      "match_thresh: 0.8\n"
      "fuse_score: True\n";
  static const char* const kBotSortExtra =
      "gmc_method: sparseOptFlow\n"
      "proximity_thresh: 0.5\n"
      "appearance_thresh: 0.8\n"
      "with_reid: False\n"
      "model: auto\n";
  if (name == "bytetrack.yaml" || name == "bytetrack") return kByteTrack;
  if (name == "botsort.yaml" || name == "botsort") {
    std::string s = kByteTrack;
    s.replace(s.find("bytetrack"), 9, "botsort");
    return s + kBotSortExtra;
  }
  return "";
}

TrackerConfig load_tracker_config(const std::string& name_or_path) {
  struct stat st;
  if (stat(name_or_path.c_str(), &st) == 0) return read_tracker_config(name_or_path);
  const std::string text = default_tracker_yaml(name_or_path);
  if (text.empty())
    throw Error(ErrorCode::kIo, "tracker config '" + name_or_path +
                                    "': no such file, and not one of the built-in bytetrack.yaml, botsort.yaml");
  return parse_tracker_config(text, name_or_path + " (built-in)");
}

}  // namespace yolocu
