# YOLOCU_CUDA=AUTO (what `pip install .` passes, see pyproject.toml): build the CUDA parts when a
# CUDA compiler and cuDNN (and, where the GPU engine needs it, cudnn-frontend's headers) are found,
# else a CPU-only build. ON / OFF keep their meaning.
if(YOLOCU_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDNN QUIET)
  set(_yolocu_fe_ok TRUE)
  if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/FindCudnnFrontend.cmake")
    find_package(CudnnFrontend QUIET)
    set(_yolocu_fe_ok ${CudnnFrontend_FOUND})
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDNN_FOUND AND _yolocu_fe_ok)
    set(YOLOCU_CUDA ON)
  else()
    set(YOLOCU_CUDA OFF)
  endif()
  message(STATUS "yolocu: YOLOCU_CUDA=AUTO -> ${YOLOCU_CUDA} (CUDA compiler: '${CMAKE_CUDA_COMPILER}', "
                 "cuDNN found: '${CUDNN_FOUND}', cudnn-frontend: '${_yolocu_fe_ok}')")
endif()
