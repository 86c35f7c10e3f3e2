# Resolves the YOLOCU_CUDA choice (cache: AUTO, ON or OFF) into ON or OFF.
#
# The answer is a normal variable named YOLOCU_CUDA: it shadows the cache entry in this directory and
# every subdirectory, so `if(YOLOCU_CUDA)` means "the CUDA parts are built" everywhere, while the
# cache keeps the user's choice (AUTO stays AUTO, and a later configure decides again).
#
# Where nvcc comes from, in order: CMAKE_CUDA_COMPILER / $CUDACXX, nvcc on PATH or in
# /usr/local/cuda (check_language), then the toolkit that `scripts/setup.sh --cuda` installs from
# PyPI wheels into YOLOCU_PIP_CUDA_DIR (cuda/ and cudnn/).
include(CheckLanguage)
string(TOUPPER "${YOLOCU_CUDA}" _yolocu_cuda_choice)
if(_yolocu_cuda_choice STREQUAL "AUTO")
  set(_yolocu_cuda_required OFF)
elseif(YOLOCU_CUDA)
  set(_yolocu_cuda_required ON)
else()
  set(YOLOCU_CUDA OFF)
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER)
  unset(CMAKE_CUDA_COMPILER CACHE)  # a NOTFOUND from an earlier configure: look again
  check_language(CUDA)
endif()
set(_yolocu_pip_nvcc "${YOLOCU_PIP_CUDA_DIR}/cuda/bin/nvcc")
if(NOT CMAKE_CUDA_COMPILER AND EXISTS "${_yolocu_pip_nvcc}")
  message(STATUS "CUDA: no system toolkit; using the PyPI one from scripts/setup.sh --cuda (${YOLOCU_PIP_CUDA_DIR})")
  set(CMAKE_CUDA_COMPILER "${_yolocu_pip_nvcc}" CACHE FILEPATH "CUDA compiler" FORCE)
  set(CMAKE_CUDA_COMPILER "${_yolocu_pip_nvcc}")  # check_language left a NOTFOUND normal variable
endif()
if(CMAKE_CUDA_COMPILER AND CMAKE_CUDA_COMPILER STREQUAL _yolocu_pip_nvcc)
  # cuDNN and the toolkit libraries live beside the compiler in the same virtual environment
  if(NOT DEFINED CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT "${YOLOCU_PIP_CUDA_DIR}/cuda")
  endif()
  if(NOT DEFINED CUDNN_ROOT AND NOT DEFINED ENV{CUDNN_ROOT})
    set(CUDNN_ROOT "${YOLOCU_PIP_CUDA_DIR}/cudnn")
  endif()
endif()

# AUTO also needs what the GPU engine builds on: cuDNN and cudnn-frontend's headers (the
# nvidia-cudnn-frontend wheel that scripts/setup.sh installs into .venv).
set(_yolocu_cuda_missing "")
if(CMAKE_CUDA_COMPILER AND NOT _yolocu_cuda_required)
  find_package(CUDNN QUIET)
  find_package(CudnnFrontend QUIET)
  if(NOT CUDNN_FOUND)
    set(_yolocu_cuda_missing "cuDNN")
  elseif(NOT CudnnFrontend_FOUND)
    set(_yolocu_cuda_missing "cudnn-frontend's headers (pip install nvidia-cudnn-frontend, or scripts/setup.sh)")
  endif()
endif()

if(CMAKE_CUDA_COMPILER AND _yolocu_cuda_missing)
  set(YOLOCU_CUDA OFF)
  message(NOTICE "yolocu: nvcc found but no ${_yolocu_cuda_missing}: building the CPU parts only; the GPU parts are off.")
elseif(CMAKE_CUDA_COMPILER)
  set(YOLOCU_CUDA ON)
elseif(_yolocu_cuda_required)
  message(FATAL_ERROR
    "YOLOCU_CUDA=ON but no CUDA compiler (nvcc) was found.\n"
    "Install one with `scripts/setup.sh --cuda` (CUDA 13.0 and cuDNN from PyPI into .venv), point CMake at "
    "yours with -DCMAKE_CUDA_COMPILER=/path/to/nvcc, or build the CPU parts only with -DYOLOCU_CUDA=AUTO or OFF.")
else()
  set(YOLOCU_CUDA OFF)
  message(NOTICE
    "yolocu: no CUDA toolkit (nvcc) found: building the CPU parts only (library, CLI, tests); the GPU parts are off.\n"
    "  To build them: `scripts/setup.sh --cuda` (installs CUDA 13.0 and cuDNN from PyPI into .venv), or\n"
    "  -DCMAKE_CUDA_COMPILER=/path/to/nvcc, and configure again. -DYOLOCU_CUDA=OFF silences this.")
endif()
