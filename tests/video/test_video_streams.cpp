// StreamSet: many sources batched together; a dead, stalled or unreachable source never stalls the
// others; reconnects with back-off; live sources drop their oldest frame when the consumer is slow;
// stop() ends everything promptly. Also run under AddressSanitizer by scripts/test.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "video/video_test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video_streams.hpp"

namespace yolocu {
namespace {

using Clock = std::chrono::steady_clock;

struct Drained {
  std::map<int, std::vector<VideoFrame>> frames;  // by stream id, in the order received
  size_t batches = 0, largest = 0;
  std::vector<std::string> messages;
};

Drained drain(StreamSet& set, size_t batch_size, std::chrono::milliseconds pause = std::chrono::milliseconds(0),
              int group = 0) {
  Drained d;
  std::vector<VideoFrame> batch;
  while (set.next_batch(batch, batch_size, group)) {
    ++d.batches;
    d.largest = std::max(d.largest, batch.size());
    EXPECT_LE(batch.size(), batch_size);
    for (VideoFrame& f : batch) d.frames[f.stream_id].push_back(std::move(f));
    for (auto& m : set.take_messages()) d.messages.push_back(m);
    if (pause.count()) std::this_thread::sleep_for(pause);
  }
  for (auto& m : set.take_messages()) d.messages.push_back(m);
  return d;
}

bool any_message(const Drained& d, const std::string& part) {
  for (const auto& m : d.messages)
    if (m.find(part) != std::string::npos) return true;
  return false;
}

std::string all_messages(const Drained& d) {
  std::string s;
  for (const auto& m : d.messages) s += "\n  " + m;
  return s;
}

TEST(StreamSet, TwoFilesBatchedTogetherInOrder) {
  YOLOCU_REQUIRE_VIDEO(h264, "clip_h264.mp4");
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  const std::vector<VideoFrame> alone = test::read_all(mjpeg);
  StreamSet set({h264, mjpeg});
  EXPECT_EQ(set.size(), 2u);
  const Drained d = drain(set, 4);
  ASSERT_EQ(d.frames.size(), 2u);
  for (int id : {0, 1}) {
    const auto& fs = d.frames.at(id);
    ASSERT_EQ(fs.size(), 30u) << "stream " << id;
    for (size_t i = 0; i < fs.size(); ++i) {
      EXPECT_EQ(fs[i].index, static_cast<int64_t>(i)) << "stream " << id;
      EXPECT_EQ(fs[i].stream_id, id);
    }
  }
  for (size_t i = 0; i < alone.size(); ++i)  // the same pixels as a lone FrameSource
    EXPECT_EQ(0, std::memcmp(alone[i].image.data(), d.frames.at(1)[i].image.data(), alone[i].image.size_bytes()));
  EXPECT_GT(d.largest, 1u) << "frames of the two streams never shared a batch";
  for (const StreamStatus& st : set.status()) {
    EXPECT_EQ(st.state, StreamState::kFinished) << st.source << ": " << st.error;
    EXPECT_EQ(st.delivered, 30);
    EXPECT_EQ(st.dropped, 0);
  }
  EXPECT_TRUE(any_message(d, "end of stream after 30 frames")) << all_messages(d);
}

TEST(StreamSet, DeadSourcesDoNotStopTheOthers) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::string bad = test::scratch_dir("video_streams") + "/missing.mp4";
  StreamOptions o;
  o.source.vid_stride = 3;
  StreamSet set({bad, clip, "/dev/video99"}, o);
  const Drained d = drain(set, 8);
  ASSERT_EQ(d.frames.count(1), 1u);
  EXPECT_EQ(d.frames.at(1).size(), 10u);
  EXPECT_EQ(d.frames.count(0), 0u);
  const auto st = set.status();
  EXPECT_EQ(st[0].state, StreamState::kFailed);
  EXPECT_NE(st[0].error.find("no such file"), std::string::npos) << st[0].error;
  EXPECT_EQ(st[1].state, StreamState::kFinished);
  EXPECT_EQ(st[2].state, StreamState::kFailed);
  EXPECT_TRUE(any_message(d, "stream 0 (" + bad + "): failed")) << all_messages(d);
}

TEST(StreamSet, StalledNetworkStreamReconnectsThenFailsWhileAFileKeepsGoing) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::string bytes = test::read_bytes(clip);
  test::LocalHttpServer stalling(bytes, static_cast<long>(bytes.size() / 2));
  StreamOptions o;
  o.source.read_timeout_s = 1;
  o.max_reconnects = 1;
  o.reconnect_delay_s = 0.1;
  const auto t0 = Clock::now();
  StreamSet set({stalling.url(), clip}, o);
  // the file's frames come while the network stream stalls: the file must finish long before the
  // network stream has given up (2 connections x 1 s timeout + back-off)
  std::vector<VideoFrame> batch;
  size_t file_frames = 0;
  double file_done_s = -1;
  Drained d;
  while (set.next_batch(batch, 2)) {
    for (VideoFrame& f : batch)
      if (f.stream_id == 1 && ++file_frames == 30) file_done_s = std::chrono::duration<double>(Clock::now() - t0).count();
    for (auto& m : set.take_messages()) d.messages.push_back(m);
  }
  for (auto& m : set.take_messages()) d.messages.push_back(m);
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(file_frames, 30u);
  EXPECT_GE(file_done_s, 0);
  EXPECT_LT(file_done_s, 2.0) << "the file waited for the stalled stream (its first timeout + back-off + second timeout: > 2.1 s)";
  EXPECT_LT(total_s, 15.0);
  const auto st = set.status();
  EXPECT_EQ(st[0].state, StreamState::kFailed);
  EXPECT_EQ(st[0].reconnects, 1);
  EXPECT_NE(st[0].error.find("stopped sending"), std::string::npos) << st[0].error;
  EXPECT_GE(stalling.connections(), 2);
  EXPECT_TRUE(any_message(d, "reconnecting in 0.1 s")) << all_messages(d);
  EXPECT_TRUE(any_message(d, "failed after 1 reconnect attempts")) << all_messages(d);
}

TEST(StreamSet, UnreachableUrlBacksOffAndGivesUp) {
  const std::string url = "http://127.0.0.1:" + std::to_string(test::closed_port()) + "/cam";
  StreamOptions o;
  o.max_reconnects = 3;
  o.reconnect_delay_s = 0.05;
  o.reconnect_max_delay_s = 0.1;
  StreamSet set({url}, o);
  const Drained d = drain(set, 1);
  EXPECT_TRUE(d.frames.empty());
  const auto st = set.status();
  EXPECT_EQ(st[0].state, StreamState::kFailed);
  EXPECT_EQ(st[0].reconnects, 3);
  EXPECT_TRUE(any_message(d, "reconnecting in 0.1 s")) << all_messages(d);  // 0.05, 0.1, 0.1 (capped)
  EXPECT_TRUE(any_message(d, "failed after 3 reconnect attempts")) << all_messages(d);
}

TEST(StreamSet, SlowConsumerMakesLiveSourcesDropTheOldestFrame) {
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  test::LocalHttpServer server(test::read_bytes(mjpeg));
  StreamOptions o;
  o.queue_depth = 1;
  StreamSet set({server.url("clip.avi")}, o);
  const Drained d = drain(set, 1, std::chrono::milliseconds(30));
  const StreamStatus st = set.status().at(0);
  EXPECT_EQ(st.state, StreamState::kFinished) << st.error;
  EXPECT_GT(st.dropped, 0);
  const size_t got = d.frames.count(0) ? d.frames.at(0).size() : 0;
  EXPECT_EQ(static_cast<int64_t>(got) + st.dropped, 30);
  int64_t last = -1;
  for (const VideoFrame& f : d.frames.at(0)) {  // still in order, gaps where frames were dropped
    EXPECT_GT(f.index, last);
    last = f.index;
  }
}

TEST(StreamSet, StopEndsBlockedReadersPromptly) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::string bytes = test::read_bytes(clip);
  test::LocalHttpServer stalling(bytes, static_cast<long>(bytes.size() / 3));
  StreamOptions o;
  o.queue_depth = 1;  // the file reader blocks on its full queue
  o.source.read_timeout_s = 60;
  auto set = std::make_unique<StreamSet>(std::vector<std::string>{clip, stalling.url()}, o);
  std::vector<VideoFrame> batch;
  ASSERT_TRUE(set->next_batch(batch, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  set->stop();
  EXPECT_FALSE(set->next_batch(batch, 1));
  set.reset();  // joins both threads
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
}

// Two consumers (one detector per GPU): each takes its own group's sources only, and one group
// drains to its end while the other's consumer has not started (its file readers wait on full queues).
TEST(StreamSet, GroupsAreDrainedApart) {
  YOLOCU_REQUIRE_VIDEO(h264, "clip_h264.mp4");
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  StreamOptions o;
  o.queue_depth = 2;
  o.groups = {0, 1, 0};
  StreamSet set({h264, mjpeg, h264}, o);
  EXPECT_EQ(set.groups(), 2);
  const Drained second = drain(set, 4, std::chrono::milliseconds(0), 1);
  ASSERT_EQ(second.frames.size(), 1u);
  ASSERT_EQ(second.frames.count(1), 1u);
  EXPECT_EQ(second.frames.at(1).size(), 30u);
  EXPECT_EQ(set.status().at(0).delivered, 0) << "group 1's consumer took a frame of group 0";
  const Drained first = drain(set, 4, std::chrono::milliseconds(0), 0);
  ASSERT_EQ(first.frames.size(), 2u);
  for (int id : {0, 2}) {
    const auto& fs = first.frames.at(id);
    ASSERT_EQ(fs.size(), 30u) << "stream " << id;
    for (size_t i = 0; i < fs.size(); ++i) EXPECT_EQ(fs[i].index, static_cast<int64_t>(i)) << "stream " << id;
  }
  EXPECT_GT(first.largest, 1u) << "the two streams of group 0 never shared a batch";
  for (const StreamStatus& st : set.status()) EXPECT_EQ(st.state, StreamState::kFinished) << st.source << ": " << st.error;
}

TEST(StreamSet, GroupsDrainedByConcurrentConsumers) {
  YOLOCU_REQUIRE_VIDEO(h264, "clip_h264.mp4");
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  StreamOptions o;
  o.groups = {1, 0, 1, 0};
  StreamSet set({h264, mjpeg, mjpeg, h264}, o);
  Drained d[2];
  std::thread t0([&] { d[0] = drain(set, 3, std::chrono::milliseconds(0), 0); });
  std::thread t1([&] { d[1] = drain(set, 3, std::chrono::milliseconds(1), 1); });
  t0.join();
  t1.join();
  for (int g : {0, 1}) {
    ASSERT_EQ(d[g].frames.size(), 2u) << "group " << g;
    for (const auto& [id, fs] : d[g].frames) {
      EXPECT_EQ(o.groups[static_cast<size_t>(id)], g) << "stream " << id << " went to group " << g;
      EXPECT_EQ(fs.size(), 30u) << "stream " << id;
    }
  }
}

TEST(StreamSet, RejectsBadArguments) {
  EXPECT_THROW(StreamSet({}), Error);
  StreamOptions o;
  o.queue_depth = 0;
  EXPECT_THROW(StreamSet({"a.mp4"}, o), Error);
  auto message = [](const std::vector<std::string>& sources, const StreamOptions& opt) {
    try {
      StreamSet set(sources, opt);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  StreamOptions g;
  g.groups = {0};
  EXPECT_NE(message({"a.mp4", "b.mp4"}, g).find("groups has 1 entries for 2 sources"), std::string::npos);
  g.groups = {0, 1};
  g.group_cuda_devices = {0};
  EXPECT_NE(message({"a.mp4", "b.mp4"}, g).find("group_cuda_devices has 1 entries for 2 groups"), std::string::npos);
  g.groups = {0, -1};
  g.group_cuda_devices.clear();
  EXPECT_NE(message({"a.mp4", "b.mp4"}, g).find("group -1 out of range"), std::string::npos);
  StreamSet one({"no/such/file.mp4"});
  std::vector<VideoFrame> batch;
  EXPECT_THROW(one.next_batch(batch, 1, 1), Error);
  StreamOptions spare;  // two GPUs, one source: the second group has nothing and ends at once
  spare.groups = {0};
  spare.group_cuda_devices = {0, 1};
  StreamSet lone({"no/such/file.mp4"}, spare);
  EXPECT_EQ(lone.groups(), 2);
  EXPECT_FALSE(lone.next_batch(batch, 1, 1));
}

}  // namespace
}  // namespace yolocu
