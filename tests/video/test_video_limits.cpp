// What FFmpeg may open per source, and credentials never printed: the input policy (no FFmpeg),
// redact_source, and a local HLS playlist served from 127.0.0.1 whose segments name another host,
// which must never be asked for. The server binds 127.0.0.1 only, answers at most 64 requests and
// stops by itself.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "video/input_policy.hpp"
#include "video/video_test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_streams.hpp"

namespace yolocu {
namespace {

using video::input_policy;
using video::InputPolicy;
using video::url_allowed;
using video::url_host;

std::string open_error(const std::string& source, VideoSourceOptions o = {}) {
  o.open_timeout_s = 5;
  o.read_timeout_s = 5;
  try {
    auto s = FrameSource::open(source, o);
    VideoFrame f;
    while (s->read(f)) {
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VideoLimits, RedactSource) {
  EXPECT_EQ(redact_source("rtsp://user:pass@cam.local:554/live"), "rtsp://***@cam.local:554/live");
  EXPECT_EQ(redact_source("rtsp://admin@cam/x"), "rtsp://***@cam/x");
  EXPECT_EQ(redact_source("http://h/p?a=1&token=abc&key=k#frag"), "http://h/p?a=1&token=***&key=***#frag");
  EXPECT_EQ(redact_source("http://h/a@b/c"), "http://h/a@b/c");  // an @ in the path is no userinfo
  EXPECT_EQ(redact_source("/videos/clip.mp4"), "/videos/clip.mp4");
  EXPECT_EQ(redact_source("Opening 'http://u:p@h/x.ts' for reading; then rtsp://a:b@c/d"),
            "Opening 'http://***@h/x.ts' for reading; then rtsp://***@c/d");
  EXPECT_EQ(redact_source(""), "");
  EXPECT_EQ(redact_source("://"), "://");
}

TEST(VideoLimits, PolicyPerSourceKind) {
  const InputPolicy file = input_policy("clip.mp4", SourceKind::kFile);
  EXPECT_EQ(file.protocols, "file");
  EXPECT_EQ(file.formats.find("hls"), std::string::npos);
  EXPECT_EQ(file.formats.find("concat"), std::string::npos);
  const InputPolicy rtsp = input_policy("rtsp://u:p@Cam:554/x", SourceKind::kNetwork);
  EXPECT_EQ(rtsp.protocols.find("http"), std::string::npos);
  EXPECT_EQ(rtsp.protocols.find("file"), std::string::npos);
  EXPECT_EQ(rtsp.host, "cam:554");
  const InputPolicy http = input_policy("http://127.0.0.1:8080/list.m3u8", SourceKind::kNetwork);
  EXPECT_EQ(http.protocols.find("file"), std::string::npos);
  EXPECT_NE(http.formats.find("hls"), std::string::npos);
  std::string why;
  EXPECT_TRUE(url_allowed(http, "http://127.0.0.1:8080/seg1.ts", &why));
  EXPECT_TRUE(url_allowed(http, "https://127.0.0.1:8080/seg1.ts", &why));
  EXPECT_FALSE(url_allowed(http, "http://localhost:8080/seg1.ts", &why));
  EXPECT_NE(why.find("127.0.0.1:8080"), std::string::npos) << why;
  EXPECT_FALSE(url_allowed(http, "http://127.0.0.1:8081/seg1.ts", &why));
  EXPECT_FALSE(url_allowed(http, "http://evil@other/seg1.ts", &why));
  EXPECT_FALSE(url_allowed(http, "/etc/passwd", &why));
  EXPECT_EQ(url_host("http://u:p@Host:1/x?y"), "host:1");
  std::string message;
  EXPECT_EQ(test::code_of([&] { input_policy("gopher://u:secret@h/x", SourceKind::kNetwork); }, &message),
            ErrorCode::kUnsupported);
  EXPECT_EQ(message.find("secret"), std::string::npos) << message;
}

// The playlist names a segment on another host first (same server, other host name: any request
// for it would reach the server with Host: localhost), then one on the source's host.
TEST(VideoLimits, HlsPlaylistNeverReachesAnotherHost) {
  std::map<std::string, std::string> files;
  test::LocalHttpServer server(std::map<std::string, std::string>{});
  const std::string port = std::to_string(server.port());
  // the server's files are fixed at construction: a second server serves the playlist naming the first's port
  files["list.m3u8"] = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:0\n"
                       "#EXTINF:1.0,\nhttp://localhost:" + port + "/other.ts\n"
                       "#EXTINF:1.0,\nseg_same.ts\n#EXT-X-ENDLIST\n";
  files["seg_same.ts"] = std::string(188 * 8, '\0');
  test::LocalHttpServer hls(files);
  const std::string source = "http://user:secret@127.0.0.1:" + std::to_string(hls.port()) + "/list.m3u8";
  const std::string error = open_error(source);
  std::printf("[ hls error ] %s\n", error.c_str());
  EXPECT_EQ(error.find("secret"), std::string::npos) << error;
  for (const std::string& r : hls.requests()) {
    std::printf("[ hls server ] %s\n", r.c_str());
    EXPECT_EQ(r.find("other.ts"), std::string::npos) << r;
    EXPECT_EQ(r.find("host=localhost"), std::string::npos) << r;
  }
  EXPECT_TRUE(server.requests().empty()) << "the other host was asked: " << server.requests().front();
  EXPECT_NE(error.find("refused to open http://localhost:"), std::string::npos) << error;
  bool playlist = false, same = false;
  for (const std::string& r : hls.requests()) {
    playlist = playlist || r.find("GET /list.m3u8") == 0;
    same = same || r.find("GET /seg_same.ts") == 0;
  }
  EXPECT_TRUE(playlist) << "the playlist was never fetched";
  EXPECT_TRUE(same) << "the same-host segment was never fetched";
}

// A playlist on disk is a file source: it opens files only, and no playlist format at all.
TEST(VideoLimits, PlaylistFileNeverReachesTheNetwork) {
  test::LocalHttpServer server(std::map<std::string, std::string>{{"seg.ts", std::string(188 * 8, '\0')}});
  const std::string path = test::scratch_dir("video_limits") + "/list.m3u8";
  test::write_bytes(path, "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\n" + server.url("seg.ts") + "\n#EXT-X-ENDLIST\n");
  const std::string error = open_error(path);
  std::printf("[ playlist file error ] %s\n", error.c_str());
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(server.requests().empty()) << server.requests().front();
}

TEST(VideoLimits, CredentialsNeverInMessagesOrInfo) {
  const std::string source = "rtsp://admin:hunter2@127.0.0.1:" + std::to_string(test::closed_port()) + "/live";
  const std::string error = open_error(source);
  std::printf("[ rtsp error ] %s\n", error.c_str());
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(error.find("hunter2"), std::string::npos) << error;
  EXPECT_NE(error.find("rtsp://***@127.0.0.1"), std::string::npos) << error;
  StreamOptions so;
  so.max_reconnects = 0;
  StreamSet set({source}, so);
  set.stop();
  for (const StreamStatus& st : set.status()) EXPECT_EQ(st.source.find("hunter2"), std::string::npos) << st.source;
}

}  // namespace
}  // namespace yolocu
