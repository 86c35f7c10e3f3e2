# FindCutlass: locates CUTLASS (NVIDIA's header-only CUDA C++ template library; the PyPI wheel
# nvidia-cutlass, installed into the project's .venv by scripts/setup.sh, ships its headers under
# site-packages/cutlass_library/source/include). Hints: CUTLASS_ROOT, $CUTLASS_ROOT, the project's
# .venv. Result: Cutlass_FOUND, Cutlass_VERSION and the imported target Cutlass::headers.
file(GLOB _cutlass_venv_includes "${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages/cutlass_library/source/include")
find_path(CUTLASS_INCLUDE_DIR cutlass/cutlass.h
          HINTS ${CUTLASS_ROOT} $ENV{CUTLASS_ROOT} ${_cutlass_venv_includes}
          PATH_SUFFIXES include)
include(${CMAKE_CURRENT_LIST_DIR}/HeaderVersion.cmake)
if(CUTLASS_INCLUDE_DIR)
  yolocu_header_version(Cutlass_VERSION "${CUTLASS_INCLUDE_DIR}/cutlass/version.h" CUTLASS_MAJOR CUTLASS_MINOR CUTLASS_PATCH)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Cutlass REQUIRED_VARS CUTLASS_INCLUDE_DIR VERSION_VAR Cutlass_VERSION)
if(Cutlass_FOUND AND NOT TARGET Cutlass::headers)
  add_library(Cutlass::headers INTERFACE IMPORTED)
  # SYSTEM: CUTLASS's own warnings are not this project's
  set_target_properties(Cutlass::headers PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${CUTLASS_INCLUDE_DIR}"
                                                    INTERFACE_INCLUDE_DIRECTORIES "${CUTLASS_INCLUDE_DIR}")
endif()
mark_as_advanced(CUTLASS_INCLUDE_DIR)
