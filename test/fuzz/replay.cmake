# Runs FUZZER once on every file in DIR (kept crash reproducers); fails if any
# run fails. An empty DIR passes.
file(GLOB inputs "${DIR}/*")
foreach(input ${inputs})
  get_filename_component(name ${input} NAME)
  if(name MATCHES "^\\.")
    continue()
  endif()
  execute_process(COMMAND ${FUZZER} ${input} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fuzz regression ${input} failed:\n${err}")
  endif()
endforeach()
