// yolocu: command-line front end. Every sub-command prints its own --help.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <system_error>

#include "args.hpp"
#include "commands.hpp"
#include "paths.hpp"
#include "yolocu/error.hpp"

namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: yolocu <command> [options]\n\n"
               "commands:\n"
               "  detect    detect objects in images (JSON, YOLO txt, annotated JPEGs, stage dumps)\n"
               "  track     track objects over video and streams (ByteTrack, BoT-SORT): ids, counts, MOT files\n"
               "  eval      mAP of a model over a labelled image folder (val.py metrics)\n"
               "  calibrate INT8 calibration: activation and weight scales from a folder of images\n"
               "  bench     latency (median, p90, p99) and throughput of detection, per stage and batch size\n"
               "  infer     run an ONNX model on .npy tensors, write every output as .npy\n"
               "  inspect   describe an ONNX model: inputs, outputs, opset, ops, metadata\n\n"
               "yolocu <command> --help shows the options of a command.\n");
}

// yolocu detect --source and yolocu track run decoder threads next to the CPU engine's OpenMP threads; with
// libgomp's default active waiting the OpenMP threads spin between layers and starve the decoders
// (on the 2-core machine, 1080p H.264 + yolov5n: 1.7 frames/s active, 9.6-13 passive; docs/video.md).
// libgomp reads OMP_WAIT_POLICY once, when it is loaded, so the CLI restarts itself with PASSIVE
// unless the caller chose a policy.
void prefer_passive_openmp_for_video(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[1], "detect") != 0 && std::strcmp(argv[1], "track") != 0) ||
      std::getenv("OMP_WAIT_POLICY"))
    return;
  bool video = false;
  for (int i = 2; i < argc; ++i)  // --source, or a video file given as a PATH (by its extension)
    video = video || !std::strcmp(argv[i], "--source") || !std::strncmp(argv[i], "--source=", 9) ||
            (argv[i][0] != '-' && yolocu::cli::has_video_suffix(argv[i]));
  if (!video) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_for_video(argc, argv);
  // Over a file-size limit (ulimit -f) a write then fails with EFBIG, which the output is refused
  // with by name, instead of the signal killing the process mid-file.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version") {
    std::printf("yolocu 0.1.0\n");
    return 0;
  }
  try {
    if (cmd == "infer") return yolocu::cli::cmd_infer(argc, argv);
    if (cmd == "inspect") return yolocu::cli::cmd_inspect(argc, argv);
    if (cmd == "detect") return yolocu::cli::cmd_detect(argc, argv);
    if (cmd == "eval") return yolocu::cli::cmd_eval(argc, argv);
    if (cmd == "bench") return yolocu::cli::cmd_bench(argc, argv);
    if (cmd == "track") return yolocu::cli::cmd_track(argc, argv);
    if (cmd == "calibrate") return yolocu::cli::cmd_calibrate(argc, argv);
    std::fprintf(stderr, "yolocu: unknown command '%s'\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const yolocu::cli::UsageError& e) {
    std::fprintf(stderr, "yolocu %s: %s (see yolocu %s --help)\n", cmd.c_str(), e.what(), cmd.c_str());
    return 2;
  } catch (const yolocu::Error& e) {
    std::fprintf(stderr, "yolocu %s: %s: %s\n", cmd.c_str(), yolocu::error_code_name(e.code()), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "yolocu %s: out of memory (an allocation failed: the machine's memory, a ulimit -v or cgroup limit)\n",
                 cmd.c_str());
    return 1;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "yolocu %s: cannot start a thread or use a system resource (%s): a process or memory limit "
                 "(ulimit -u, ulimit -v)?\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "yolocu %s: unexpected error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
