# YOLOCU_CUDA=AUTO (what `pip install .` passes, see pyproject.toml): build the CUDA parts when a
# CUDA compiler and cuDNN are found, else a CPU-only build. ON / OFF keep their meaning.
if(YOLOCU_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDNN QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDNN_FOUND)
    set(YOLOCU_CUDA ON)
  else()
    set(YOLOCU_CUDA OFF)
  endif()
  message(STATUS "yolocu: YOLOCU_CUDA=AUTO -> ${YOLOCU_CUDA} (CUDA compiler: '${CMAKE_CUDA_COMPILER}', cuDNN found: '${CUDNN_FOUND}')")
endif()
