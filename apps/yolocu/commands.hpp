// The yolocu CLI sub-commands.
#pragma once

namespace yolocu::cli {

int cmd_infer(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_detect(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_bench(int argc, char** argv);

}  // namespace yolocu::cli
