# FindCudnnFrontend: locates cudnn-frontend, cuDNN's header-only C++ Graph API (the PyPI wheel
# nvidia-cudnn-frontend, installed into the project's .venv by scripts/setup.sh, ships it under
# site-packages/include). Hints: CUDNN_FRONTEND_ROOT, $CUDNN_FRONTEND_ROOT, the project's .venv.
# Result: CudnnFrontend_FOUND, CudnnFrontend_VERSION and the imported target CudnnFrontend::headers.
file(GLOB _fe_venv_includes "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/include")
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
          HINTS ${CUDNN_FRONTEND_ROOT} $ENV{CUDNN_FRONTEND_ROOT} ${_fe_venv_includes}
          PATH_SUFFIXES include)
include(${CMAKE_CURRENT_LIST_DIR}/HeaderVersion.cmake)
if(CUDNN_FRONTEND_INCLUDE_DIR)
  yolocu_header_version(CudnnFrontend_VERSION "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h"
                        CUDNN_FRONTEND_MAJOR_VERSION CUDNN_FRONTEND_MINOR_VERSION CUDNN_FRONTEND_PATCH_VERSION)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CudnnFrontend REQUIRED_VARS CUDNN_FRONTEND_INCLUDE_DIR
                                  VERSION_VAR CudnnFrontend_VERSION)
if(CudnnFrontend_FOUND AND NOT TARGET CudnnFrontend::headers)
  add_library(CudnnFrontend::headers INTERFACE IMPORTED)
  set_target_properties(CudnnFrontend::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_FRONTEND_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_FRONTEND_INCLUDE_DIR)
