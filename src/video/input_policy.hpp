// What FFmpeg may open for one source (no FFmpeg types: tested without it). A file source opens
// files only, in the container formats of video files (no playlists: an .m3u8 or concat list on
// disk must not reach the network); rtsp/rtsps only their own transports; http(s) only http(s), and
// every URL a playlist names only on the source's own host; a camera only its V4L2 device.
#pragma once

#include <string>

#include "yolocu/video.hpp"

namespace yolocu::video {

struct InputPolicy {
  std::string protocols;  // FFmpeg's protocol_whitelist (comma-separated)
  std::string formats;    // FFmpeg's format_whitelist; "" leaves the choice to FFmpeg's probing
  std::string host;       // non-empty: every URL opened must be on this host[:port] (lower case)
};

// kUnsupported naming the (redacted) source for a scheme yolocu does not open.
InputPolicy input_policy(const std::string& source, SourceKind kind);

// The host[:port] of a URL, lower case; "" for none (a path).
std::string url_host(const std::string& url);

// Whether FFmpeg may open `url` (the source itself or a URL a playlist names) under `policy`;
// `*why` says why not.
bool url_allowed(const InputPolicy& policy, const std::string& url, std::string* why);

}  // namespace yolocu::video
