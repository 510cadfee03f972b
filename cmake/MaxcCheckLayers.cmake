# cmake -DSOURCE_DIR=<maxc> -P MaxcCheckLayers.cmake
# Fails (exit 1, one line per include) when a file of lib/<C>/ or
# include/maxc/<C>/ includes "maxc/<D>/..." for a component D that C may not
# use (cmake/MaxcLayers.cmake). include/maxc/maxc.h, the umbrella header, may
# include everything. Also: lib/Codegen/*.{h,cpp} (the backend-neutral
# files) include nothing from the backend folders.
cmake_minimum_required(VERSION 3.20)
include(${CMAKE_CURRENT_LIST_DIR}/MaxcLayers.cmake)
set(violations 0)
foreach(component IN LISTS MAXC_COMPONENTS)
  set(allowed ${component} ${MAXC_LAYER_${component}})
  file(GLOB_RECURSE files ${SOURCE_DIR}/lib/${component}/*.cpp ${SOURCE_DIR}/lib/${component}/*.h
       ${SOURCE_DIR}/include/maxc/${component}/*.h)
  foreach(file IN LISTS files)
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"maxc/[A-Za-z]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE ".*\"maxc/([A-Za-z]+)/.*" "\\1" used "${line}")
      if(NOT used IN_LIST MAXC_COMPONENTS)
        message(SEND_ERROR "${file}: includes unknown component ${used}: ${line}")
        math(EXPR violations "${violations} + 1")
      elseif(NOT used IN_LIST allowed)
        file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
        message(SEND_ERROR "${rel}: ${component} may not use ${used} (cmake/MaxcLayers.cmake): ${line}")
        math(EXPR violations "${violations} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()
# Inside Codegen: the backend-neutral files at lib/Codegen/'s top include no
# backend folder (Cpu/, Gpu/, AmdGpu/, Nvptx/, Emulator/).
file(GLOB neutral ${SOURCE_DIR}/lib/Codegen/*.cpp ${SOURCE_DIR}/lib/Codegen/*.h)
foreach(file IN LISTS neutral)
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"(Cpu|Gpu|AmdGpu|Nvptx|Emulator)/")
  foreach(line IN LISTS includes)
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
    message(SEND_ERROR "${rel}: a backend-neutral Codegen file may not include a backend folder: ${line}")
    math(EXPR violations "${violations} + 1")
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) break the component layering")
endif()
