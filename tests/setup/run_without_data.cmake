# ctest driver: `scripts/setup.sh --run` where the sample data is missing must stop at once (before
# installing or building anything) with a message naming what is missing and how to get it.
# Variables: SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/data/images")
file(WRITE "${WORK_DIR}/data/images/bus.jpg" "")  # one of the three present
execute_process(COMMAND "${CMAKE_COMMAND}" -E env YOLOCU_DATA_DIR=${WORK_DIR}/data
                        bash "${SOURCE_DIR}/scripts/setup.sh" --run
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit status 1, got '${rc}':\n${out}\n${err}")
endif()
foreach(part "not in ${WORK_DIR}/data" "missing: models/yolov5n.onnx images/zidane.jpg" "export.py" "YOLOCU_DATA_DIR")
  string(FIND "${err}" "${part}" _at)
  if(_at LESS 0)
    message(FATAL_ERROR "the message lacks '${part}':\n${err}")
  endif()
endforeach()
if(out MATCHES "\\[setup\\] (installing|creating)" OR err MATCHES "\\[setup\\] (installing|creating)")
  message(FATAL_ERROR "setup.sh went on installing:\n${out}\n${err}")
endif()
message(STATUS "${err}")
