# yolocu_header_version(<var> <header> <MAJOR macro> <MINOR macro> <PATCH macro>): sets <var> in the
# caller's scope to "major.minor.patch" from the header's "#define <macro> <number>" lines; leaves it
# unset when the header does not exist. For the Find modules of header-only libraries the build uses
# privately (FindCutlass, FindCudnnFrontend); the installed Find modules stay self-contained.
function(yolocu_header_version var header major minor patch)
  if(NOT EXISTS "${header}")
    return()
  endif()
  file(STRINGS "${header}" _v REGEX "#define (${major}|${minor}|${patch}) +[0-9]+")
  foreach(_part major minor patch)
    string(REGEX REPLACE ".*${${_part}} +([0-9]+).*" "\\1" _${_part} "${_v}")
  endforeach()
  set(${var} "${_major}.${_minor}.${_patch}" PARENT_SCOPE)
endfunction()
