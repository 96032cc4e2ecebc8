# Layering rule (docs/ARCHITECTURE.md): engine code -- src/model,
# src/engine, src/kv -- talks to the hardware only through
# src/backend/backend.h. It never includes a backend's own headers
# (src/backend/<device>/), oneDNN or CUDA. Run at build time (the llm_layering
# target, a dependency of the engine library), so breaking the rule fails the
# build with the offending lines.
#
#   cmake -DLLM_SOURCE_DIR=<repo> -P cmake/CheckLayering.cmake
if(NOT LLM_SOURCE_DIR)
  message(FATAL_ERROR "CheckLayering.cmake: set LLM_SOURCE_DIR")
endif()
set(forbidden "backend/[a-z0-9_]+/|dnnl|oneapi/|cuda|cublas|nvrtc")
set(violations "")
foreach(dir model engine kv)
  file(GLOB_RECURSE sources "${LLM_SOURCE_DIR}/src/${dir}/*.h" "${LLM_SOURCE_DIR}/src/${dir}/*.cpp"
       "${LLM_SOURCE_DIR}/src/${dir}/*.inc")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS includes)
      if(line MATCHES "[<\"]([^>\"]*)[>\"]")
        set(header "${CMAKE_MATCH_1}")
        if(header MATCHES "${forbidden}")
          file(RELATIVE_PATH rel "${LLM_SOURCE_DIR}" "${source}")
          string(APPEND violations "\n  ${rel}: #include \"${header}\"")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR
    "layering: src/model, src/engine and src/kv may reach the hardware only through "
    "src/backend/backend.h, but:${violations}")
endif()
