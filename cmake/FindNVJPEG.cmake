# FindNVJPEG: locates nvJPEG (nvjpeg.h + libnvjpeg, part of the CUDA toolkit; on PyPI the
# nvidia-nvjpeg wheel, which scripts/setup.sh --cuda installs into the same tree as the toolkit)
# and defines the imported target NVJPEG::nvjpeg. Hints: NVJPEG_ROOT, $NVJPEG_ROOT, the CUDA
# toolkit directory. Result: NVJPEG_FOUND. Optional for yolocu: without it, GPU JPEG decode
# (DetectorOptions::decode = kGpu) is refused with kUnsupported.
find_package(CUDAToolkit QUIET)
set(_nvjpeg_hints ${NVJPEG_ROOT} $ENV{NVJPEG_ROOT})
if(CUDAToolkit_FOUND)
  list(APPEND _nvjpeg_hints "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_INCLUDE_DIRS}/..")
endif()
find_path(NVJPEG_INCLUDE_DIR nvjpeg.h HINTS ${_nvjpeg_hints} PATH_SUFFIXES include)
# the PyPI wheel ships only the versioned library (libnvjpeg.so.13)
find_library(NVJPEG_LIBRARY NAMES nvjpeg libnvjpeg.so.13 HINTS ${_nvjpeg_hints} PATH_SUFFIXES lib64 lib lib/x64)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NVJPEG REQUIRED_VARS NVJPEG_LIBRARY NVJPEG_INCLUDE_DIR)
if(NVJPEG_FOUND AND NOT TARGET NVJPEG::nvjpeg)
  add_library(NVJPEG::nvjpeg UNKNOWN IMPORTED)
  set_target_properties(NVJPEG::nvjpeg PROPERTIES IMPORTED_LOCATION "${NVJPEG_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NVJPEG_INCLUDE_DIR}")
endif()
mark_as_advanced(NVJPEG_INCLUDE_DIR NVJPEG_LIBRARY)
