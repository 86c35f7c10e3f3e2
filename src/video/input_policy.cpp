// What FFmpeg may open per source kind (input_policy.hpp).
#include "video/input_policy.hpp"

#include <algorithm>
#include <cctype>

#include "core/check.hpp"

namespace yolocu::video {
namespace {

// Demuxers of video files (FFmpeg names; a whitelist entry matches any alias of a demuxer, e.g.
// "mov" the "mov,mp4,m4a,3gp,3g2,mj2" demuxer). No hls, concat, dash, image2, sdp, tee, data URIs.
constexpr const char* kFileFormats =
    "mov,matroska,avi,mpegts,flv,h264,hevc,mpegvideo,m4v,mjpeg,ivf,asf,ogg,mpeg,nut,yuv4mpegpipe,av1,obu,vc1,rawvideo";
// Network streams: the same plus what live sources send.
constexpr const char* kHttpFormats =
    "hls,mov,matroska,avi,mpegts,flv,h264,hevc,mpegvideo,m4v,mjpeg,mpjpeg,ivf,ogg,mpeg,nut,aac,mp3";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string scheme_of(const std::string& url) {
  const size_t p = url.find("://");
  return p == std::string::npos ? "" : lower(url.substr(0, p));
}

}  // namespace

std::string url_host(const std::string& url) {
  const size_t p = url.find("://");
  if (p == std::string::npos) return "";
  const size_t begin = p + 3;
  const size_t end = std::min(url.find_first_of("/?#", begin), url.size());
  std::string authority = url.substr(begin, end - begin);
  const size_t at = authority.rfind('@');
  if (at != std::string::npos) authority = authority.substr(at + 1);
  return lower(authority);
}

InputPolicy input_policy(const std::string& source, SourceKind kind) {
  InputPolicy p;
  if (kind == SourceKind::kCamera) {
    p.protocols = "file";
    return p;  // the V4L2 input format is forced by the demuxer
  }
  if (kind == SourceKind::kFile) {
    p.protocols = "file";
    p.formats = kFileFormats;
    return p;
  }
  const std::string scheme = scheme_of(source);
  if (scheme == "rtsp" || scheme == "rtsps") {
    p.protocols = scheme == "rtsp" ? "rtsp,rtp,srtp,udp,tcp" : "rtsps,rtp,srtp,udp,tcp,tls";
    p.formats = "rtsp,rtp,sdp";
    p.host = url_host(source);
  } else if (scheme == "http" || scheme == "https") {
    p.protocols = "http,https,tcp,tls,crypto";
    p.formats = kHttpFormats;
    p.host = url_host(source);
  } else if (scheme == "rtmp" || scheme == "rtmps") {
    p.protocols = "rtmp,rtmps,tcp,tls";
    p.formats = "flv,live_flv";
    p.host = url_host(source);
  } else if (scheme == "udp" || scheme == "rtp") {
    p.protocols = "udp,rtp";
    p.formats = "mpegts,rtp,h264,hevc";
  } else if (scheme == "srt" || scheme == "tcp") {
    p.protocols = scheme;
    p.formats = "mpegts,h264,hevc,matroska,flv";
    p.host = url_host(source);
  } else {
    detail::fail(ErrorCode::kUnsupported, redact_source(source), ": the URL scheme '", scheme,
                 "' is not one yolocu opens (rtsp, rtsps, http, https, rtmp, rtmps, udp, rtp, srt, tcp)");
  }
  return p;
}

bool url_allowed(const InputPolicy& policy, const std::string& url, std::string* why) {
  if (policy.host.empty()) return true;  // the protocol whitelist alone decides
  const std::string scheme = scheme_of(url);
  const std::string host = url_host(url);
  if (scheme.empty() || host != policy.host) {
    *why = "it is not on the source's host " + policy.host + " (only the source's own host is opened)";
    return false;
  }
  return true;
}

}  // namespace yolocu::video
