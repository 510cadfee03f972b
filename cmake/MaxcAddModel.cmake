# maxc_add_model(): compile a model with `maxc compile` at build time and wrap
# the object file in a library target.
#
#   maxc_add_model(<target> MODEL <model.json>
#                  [WEIGHTS <weights.safetensors>]
#                  [NAME <c-identifier>]       # symbol prefix and header name; default <target>
#                  [CPU <cpu>]                 # default ${MAXC_DEFAULT_CPU} ("portable")
#                  [OPT <0-3>]                 # default 2
#                  [OPTIONS <extra maxc compile args>...])
#
# Creates the STATIC library <target> holding
# <binary dir>/maxc_models/<target>/<name>.o; linking it gives the include
# directory with <name>.h (and <name>.manifest.json) and -lm. The model is
# recompiled exactly when the model file, its weights (WEIGHTS, or the file
# the model names: maxc writes a depfile) or the maxc executable change, or
# when the command line changes. Relative MODEL/WEIGHTS paths are relative to
# the current source directory.
#
# The target's properties MAXC_OBJECT, MAXC_HEADER, MAXC_MANIFEST and
# MAXC_DEPFILE name the generated files.
#
# Used from an install (find_package(maxc CONFIG)) it runs the imported
# maxc::maxc-cli; in maxc's own build (include() after the maxc-tool target
# exists) the in-tree maxc-tool.

include_guard(GLOBAL)

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "maxc_add_model needs CMake 3.20 or newer (DEPFILE with Ninja and Makefiles)")
endif()

set(MAXC_DEFAULT_CPU "portable" CACHE STRING
    "Default --cpu for maxc_add_model() (portable: x86-64-v3 on x86-64; native, znver4, skylake-avx512, ...)")

# Functions run with the policies in force where they are defined: CMP0116
# NEW makes the Ninja generator rewrite depfile paths to match build.ninja.
cmake_policy(PUSH)
cmake_policy(SET CMP0116 NEW)

function(maxc_add_model target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "MODEL;WEIGHTS;NAME;CPU;OPT" "OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "maxc_add_model(${target}): unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_MODEL)
    message(FATAL_ERROR "maxc_add_model(${target}): MODEL <model.json> is required")
  endif()

  # The maxc executable: the installed one, or maxc's own build target.
  if(TARGET maxc::maxc-cli)
    set(maxc_exe maxc::maxc-cli)
  elseif(TARGET maxc-tool)
    set(maxc_exe maxc-tool)
  else()
    message(FATAL_ERROR "maxc_add_model(${target}): no maxc executable target "
                        "(find_package(maxc CONFIG) provides maxc::maxc-cli)")
  endif()

  set(name "${ARG_NAME}")
  if(NOT name)
    set(name "${target}")
  endif()
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "maxc_add_model(${target}): '${name}' is not a C identifier; pass NAME <c-name>")
  endif()
  set(cpu "${ARG_CPU}")
  if(NOT cpu)
    set(cpu "${MAXC_DEFAULT_CPU}")
  endif()
  if(NOT cpu)
    set(cpu native)
  endif()
  set(opt 2)
  if(DEFINED ARG_OPT AND NOT ARG_OPT STREQUAL "")
    if(NOT ARG_OPT MATCHES "^[0-3]$")
      message(FATAL_ERROR "maxc_add_model(${target}): OPT must be 0 to 3, not '${ARG_OPT}'")
    endif()
    set(opt ${ARG_OPT})
  endif()

  get_filename_component(model "${ARG_MODEL}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(depends "${model}")
  set(weights_args)
  if(ARG_WEIGHTS)
    get_filename_component(weights "${ARG_WEIGHTS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND depends "${weights}")
    set(weights_args --weights "${weights}")
  endif()

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/maxc_models/${target}")
  set(object "${dir}/${name}.o")
  set(header "${dir}/${name}.h")
  set(manifest "${dir}/${name}.manifest.json")
  set(depfile "${dir}/${name}.o.d")
  file(MAKE_DIRECTORY "${dir}")

  # DEPFILE is supported by Ninja and Makefiles; elsewhere the explicit
  # DEPENDS (model, WEIGHTS, maxc) still apply.
  set(depfile_args)
  if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
    set(depfile_args DEPFILE "${depfile}")
  endif()

  add_custom_command(
    OUTPUT "${object}" "${header}" "${manifest}"
    COMMAND ${maxc_exe} compile "${model}" ${weights_args}
            -o "${object}" --name "${name}" --cpu "${cpu}" -O${opt}
            --emit obj,header,manifest -MD -MF "${depfile}"
            ${ARG_OPTIONS}
    DEPENDS ${depends} ${maxc_exe}
    ${depfile_args}
    COMMENT "maxc: compiling model ${name} (${model})"
    COMMAND_EXPAND_LISTS
    VERBATIM)

  set_source_files_properties("${object}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  set_source_files_properties("${header}" "${manifest}" PROPERTIES GENERATED TRUE HEADER_FILE_ONLY TRUE)

  # An archive needs a linker language; C unless the project has only C++.
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST languages)
    set(language C)
  elseif("CXX" IN_LIST languages)
    set(language CXX)
  else()
    message(FATAL_ERROR "maxc_add_model(${target}): enable C (or CXX) in project()")
  endif()

  add_library(${target} STATIC "${object}" "${header}" "${manifest}")
  set_target_properties(${target} PROPERTIES
    LINKER_LANGUAGE ${language}
    MAXC_OBJECT "${object}"
    MAXC_HEADER "${header}"
    MAXC_MANIFEST "${manifest}"
    MAXC_DEPFILE "${depfile}")
  target_include_directories(${target} INTERFACE "${dir}")
  # Generated code needs libc and libm only.
  target_link_libraries(${target} INTERFACE m)
endfunction()

cmake_policy(POP)
