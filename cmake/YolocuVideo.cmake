# Resolves the YOLOCU_VIDEO choice (cache: AUTO, ON or OFF) into ON or OFF, and makes the imported
# target PkgConfig::YOLOCU_FFMPEG (libavformat, libavcodec, libavutil, libswscale; Debian 12:
# FFmpeg 5.1's -dev packages). libavdevice (V4L2 cameras) is optional: YOLOCU_VIDEO_DEVICES says
# whether it was found, and PkgConfig::YOLOCU_AVDEVICE is made when it was.
#
# Like YolocuCuda.cmake, the answer is a normal variable that shadows the cache entry, so
# `if(YOLOCU_VIDEO)` means "the video input is built" everywhere while AUTO stays AUTO in the cache.
string(TOUPPER "${YOLOCU_VIDEO}" _yolocu_video_choice)
set(YOLOCU_VIDEO_DEVICES OFF)
if(NOT _yolocu_video_choice STREQUAL "AUTO" AND NOT YOLOCU_VIDEO)
  set(YOLOCU_VIDEO OFF)
  message(STATUS "yolocu: video input off (YOLOCU_VIDEO=OFF): yolocu detect --source reads image sequences only")
  return()
endif()

set(_yolocu_ffmpeg_modules libavformat libavcodec libavutil libswscale)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(YOLOCU_FFMPEG QUIET IMPORTED_TARGET ${_yolocu_ffmpeg_modules})
endif()
if(NOT YOLOCU_FFMPEG_FOUND)
  set(_yolocu_video_hint "FFmpeg's libraries were not found through pkg-config (${_yolocu_ffmpeg_modules}; Debian: apt install pkg-config libavformat-dev libavcodec-dev libavutil-dev libswscale-dev, or scripts/setup.sh)")
  if(_yolocu_video_choice STREQUAL "AUTO")
    set(YOLOCU_VIDEO OFF)
    message(NOTICE "yolocu: video input off: ${_yolocu_video_hint}. yolocu detect --source then reads image sequences only; -DYOLOCU_VIDEO=ON makes this an error.")
    return()
  endif()
  message(FATAL_ERROR "yolocu: YOLOCU_VIDEO=ON but ${_yolocu_video_hint}")
endif()
set(YOLOCU_VIDEO ON)
pkg_check_modules(YOLOCU_AVDEVICE QUIET IMPORTED_TARGET libavdevice)
if(YOLOCU_AVDEVICE_FOUND)
  set(YOLOCU_VIDEO_DEVICES ON)
  set(_yolocu_devices "V4L2 cameras through libavdevice ${YOLOCU_AVDEVICE_VERSION}")
else()
  set(_yolocu_devices "no cameras: libavdevice not found (Debian: libavdevice-dev)")
endif()
message(STATUS "yolocu: video input on: libavformat ${YOLOCU_FFMPEG_libavformat_VERSION}, libavcodec ${YOLOCU_FFMPEG_libavcodec_VERSION}, libswscale ${YOLOCU_FFMPEG_libswscale_VERSION}; ${_yolocu_devices}")
