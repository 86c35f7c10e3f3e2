// The parts of yolocu._yolocu defined outside yolocu_ext.cpp, registered by its NB_MODULE.
#pragma once

#include <nanobind/nanobind.h>

namespace yolocu::python {

// annotate_ext.cpp: draw() (the CLI's annotator on a NumPy image) and encode_image() / write_image().
void bind_annotate(nanobind::module_& m);
// video_ext.cpp: _VideoReader, frames of a video file, stream or camera through src/video.
void bind_video(nanobind::module_& m);

}  // namespace yolocu::python
