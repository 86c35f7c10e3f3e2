# ctest driver: configure yolocu where no nvcc can be found (CUDACXX names none, no PyPI toolkit).
# YOLOCU_CUDA=AUTO (the default) must configure the CPU parts and say so once; YOLOCU_CUDA=ON must
# stop with a message saying how to get a toolkit. Variables: SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(_args -S "${SOURCE_DIR}" -G Ninja -DYOLOCU_BUILD_TESTS=OFF -DYOLOCU_BUILD_BENCH=OFF
          "-DYOLOCU_PIP_CUDA_DIR=${WORK_DIR}/no-venv")
execute_process(COMMAND "${CMAKE_COMMAND}" -E env CUDACXX=${WORK_DIR}/no-such/nvcc
                        "${CMAKE_COMMAND}" ${_args} -B "${WORK_DIR}/auto"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "YOLOCU_CUDA=AUTO without nvcc: configure failed (${rc}):\n${out}\n${err}")
endif()
string(REGEX MATCHALL "no CUDA toolkit \\(nvcc\\) found" _said "${out}${err}")
list(LENGTH _said _n)
if(NOT _n EQUAL 1)
  message(FATAL_ERROR "expected the no-toolkit notice once, got it ${_n} times:\n${out}\n${err}")
endif()
if(NOT err MATCHES "scripts/setup.sh --cuda")
  message(FATAL_ERROR "the notice does not say how to turn the GPU parts on:\n${err}")
endif()
file(READ "${WORK_DIR}/auto/yolocuConfig.cmake" _config)
if(NOT _config MATCHES "set\\(YOLOCU_CUDA OFF\\)")
  message(FATAL_ERROR "the package config does not say YOLOCU_CUDA OFF")
endif()
file(READ "${WORK_DIR}/auto/build.ninja" _ninja)
if(_ninja MATCHES "\\.cu\\.o")
  message(FATAL_ERROR "CUDA sources in a build without nvcc")
endif()

execute_process(COMMAND "${CMAKE_COMMAND}" -E env CUDACXX=${WORK_DIR}/no-such/nvcc
                        "${CMAKE_COMMAND}" ${_args} -B "${WORK_DIR}/on" -DYOLOCU_CUDA=ON
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc)
  message(FATAL_ERROR "YOLOCU_CUDA=ON without nvcc configured:\n${out}\n${err}")
endif()
if(NOT err MATCHES "YOLOCU_CUDA=ON but no CUDA compiler \\(nvcc\\) was found" OR NOT err MATCHES "scripts/setup.sh --cuda")
  message(FATAL_ERROR "YOLOCU_CUDA=ON without nvcc: unexpected message:\n${err}")
endif()
message(STATUS "AUTO: CPU parts only, said once; ON: stops with the way to get a toolkit")
