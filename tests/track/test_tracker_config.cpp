// Reading ultralytics' tracker YAML: its own files (as shipped in 8.4), and bad keys and values
// refused with an error that names the key and the line.
#include <gtest/gtest.h>

#include <string>

#include "track_refs.hpp"
#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace yolocu {
namespace {

const char* kByteTrack = R"(# Ultralytics tracker file, as shipped
# ByteTrack tracker defaults for mode="track"

tracker_type: bytetrack # (str) Tracker backend: bytetrack
track_high_thresh: 0.25 # (float) First-stage match threshold
track_low_thresh: 0.1 # (float) Second-stage threshold
new_track_thresh: 0.25 # (float) Start a new track if no match >= this
track_buffer: 30 # (int) Frames to keep lost tracks alive
match_thresh: 0.8 # (float) Association similarity threshold
fuse_score: True # (bool) Fuse detection score with motion/IoU for matching
)";

const char* kBotSort = R"(tracker_type: botsort
track_high_thresh: 0.5
track_low_thresh: 0.1
new_track_thresh: 0.6
track_buffer: 60
match_thresh: 0.7
fuse_score: False
gmc_method: sparseOptFlow # (str) Global motion compensation
proximity_thresh: 0.5
appearance_thresh: 0.8
with_reid: False
model: auto
)";

// The message of the Error that parsing `text` throws ("" when it parses).
std::string error_of(const std::string& text) {
  try {
    parse_tracker_config(text, "t.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrackerConfig, ReadsByteTrackYaml) {
  const TrackerConfig c = parse_tracker_config(kByteTrack);
  EXPECT_EQ(c.type, TrackerType::kByteTrack);
  EXPECT_FLOAT_EQ(c.track_high_thresh, 0.25f);
  EXPECT_FLOAT_EQ(c.track_low_thresh, 0.1f);
  EXPECT_FLOAT_EQ(c.new_track_thresh, 0.25f);
  EXPECT_EQ(c.track_buffer, 30);
  EXPECT_FLOAT_EQ(c.match_thresh, 0.8f);
  EXPECT_TRUE(c.fuse_score);
}

TEST(TrackerConfig, ReadsBotSortYaml) {
  const TrackerConfig c = parse_tracker_config(kBotSort);
  EXPECT_EQ(c.type, TrackerType::kBotSort);
  EXPECT_FLOAT_EQ(c.track_high_thresh, 0.5f);
  EXPECT_FLOAT_EQ(c.new_track_thresh, 0.6f);
  EXPECT_EQ(c.track_buffer, 60);
  EXPECT_FLOAT_EQ(c.match_thresh, 0.7f);
  EXPECT_FALSE(c.fuse_score);
  EXPECT_EQ(c.gmc_method, GmcMethod::kSparseOptFlow);
  EXPECT_FALSE(c.with_reid);
  // the library cannot run sparseOptFlow (no OpenCV): refused when the Tracker is made
  EXPECT_THROW(Tracker{c}, Error);
  TrackerConfig none = c;
  none.gmc_method = GmcMethod::kNone;
  EXPECT_NO_THROW(Tracker{none});
}

TEST(TrackerConfig, QuotedValuesAndMissingKeysKeepDefaults) {
  const TrackerConfig c = parse_tracker_config("tracker_type: 'botsort'\ngmc_method: \"none\"  # off\n");
  EXPECT_EQ(c.type, TrackerType::kBotSort);
  EXPECT_EQ(c.gmc_method, GmcMethod::kNone);
  EXPECT_EQ(c.track_buffer, 30);
}

TEST(TrackerConfig, RefusesBadKeysAndValues) {
  const struct {
    const char* text;
    const char* expect;  // a part of the message
  } cases[] = {
      {"track_buffer: 30\n", "tracker_type is missing"},
      {"tracker_type: sort\n", "tracker_type must be bytetrack or botsort"},
      {"tracker_type: bytetrack\ntrack_bufer: 30\n", "t.yaml:2: unknown key 'track_bufer'"},
      {"tracker_type: bytetrack\ngmc_method: none\n", "botsort setting"},
      {"tracker_type: bytetrack\ntrack_high_thresh: high\n", "track_high_thresh must be a number"},
      {"tracker_type: bytetrack\ntrack_high_thresh: 1.5\n", "out of range"},
      {"tracker_type: bytetrack\ntrack_buffer: 2.5\n", "track_buffer must be a whole number"},
      {"tracker_type: bytetrack\ntrack_buffer: -1\n", "track_buffer must be a whole number"},
      {"tracker_type: bytetrack\nfuse_score: yes please\n", "fuse_score must be true or false"},
      {"tracker_type: bytetrack\nmatch_thresh: 0.8\nmatch_thresh: 0.7\n", "t.yaml:3: key 'match_thresh' appears twice"},
      {"tracker_type: bytetrack\ntrack_low_thresh: 0.5\ntrack_high_thresh: 0.4\n", "exceeds track_high_thresh"},
      {"tracker_type: botsort\ngmc_method: optical\n", "gmc_method must be one of"},
      {"tracker_type: bytetrack\nnested:\n  a: 1\n", "has no value"},
      {"tracker_type: bytetrack\n  track_buffer: 3\n", "nested or indented"},
      {"tracker_type: bytetrack\nmatch_thresh: [0.8]\n", "only plain scalar values"},
      {"tracker_type: bytetrack\nmatch_thresh 0.8\n", "expected 'key: value'"},
      {"tracker_type: 'bytetrack\n", "unterminated quoted value"},
      {"tracker_type: bytetrack\nmatch_thresh: '0.8'\n", "match_thresh must be a number"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.text);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "for:\n" << c.text << "got: '" << msg << "'";
  }
}

TEST(TrackerConfig, MissingFileIsAnIoError) {
  try {
    read_tracker_config("/nonexistent/bytetrack.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
}

TEST(TrackerConfig, TrackerRefusesReidAndBadThresholds) {
  TrackerConfig c;
  c.type = TrackerType::kBotSort;
  c.with_reid = true;
  EXPECT_THROW(Tracker{c}, Error);
  TrackerConfig t;
  t.track_low_thresh = 0.6f;
  EXPECT_THROW(Tracker{t}, Error);
  TrackerConfig b;
  b.track_buffer = -3;
  EXPECT_THROW(Tracker{b}, Error);
}

}  // namespace
}  // namespace yolocu

namespace yolocu {
namespace {

void expect_same_config(const TrackerConfig& a, const TrackerConfig& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.track_high_thresh, b.track_high_thresh);
  EXPECT_EQ(a.track_low_thresh, b.track_low_thresh);
  EXPECT_EQ(a.new_track_thresh, b.new_track_thresh);
  EXPECT_EQ(a.track_buffer, b.track_buffer);
  EXPECT_EQ(a.match_thresh, b.match_thresh);
  EXPECT_EQ(a.fuse_score, b.fuse_score);
  EXPECT_EQ(a.gmc_method, b.gmc_method);
  EXPECT_EQ(a.with_reid, b.with_reid);
}

// The built-in defaults equal ultralytics' own files (copied into the references by
// scripts/track/make_refs.sh: bytetrack.yaml as shipped, botsort_sof.yaml = botsort.yaml as shipped).
TEST(TrackerConfig, BuiltInDefaultsAreUltralyticsFiles) {
  if (!test::track_refs_present()) {
    if (test::track_refs_required()) FAIL() << "YOLOCU_REQUIRE_TRACK: no references in " << test::track_refs_dir();
    GTEST_SKIP() << "no tracker references in " << test::track_refs_dir() << " (scripts/track/make_refs.sh makes them)";
  }
  expect_same_config(load_tracker_config("bytetrack.yaml"), read_tracker_config(test::track_refs_dir() + "/bytetrack.yaml"));
  expect_same_config(load_tracker_config("botsort.yaml"), read_tracker_config(test::track_refs_dir() + "/botsort_sof.yaml"));
  // a file at the path wins over the built-in name
  expect_same_config(load_tracker_config(test::track_refs_dir() + "/bytetrack_tuned.yaml"),
                     read_tracker_config(test::track_refs_dir() + "/bytetrack_tuned.yaml"));
}

TEST(TrackerConfig, UnknownNameIsAnIoError) {
  try {
    load_tracker_config("strongsort.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("not one of the built-in bytetrack.yaml, botsort.yaml"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace yolocu
