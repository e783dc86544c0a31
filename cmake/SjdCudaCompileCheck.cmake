# cmake -P script run by the cuda.kernels_compile test: compiles every
# lib/kernels/*.cu for sm_90 with the flags of the real build (warnings count as
# errors; the files are compiled concurrently), then links the objects into one
# shared library. Nothing runs.
if(NOT NVCC OR NOT EXISTS "${NVCC}")
  message("SKIPPED: no nvcc found (install CUDA 13 to compile-check lib/kernels)")
  return()
endif()
file(GLOB sources ${SOURCE_DIR}/lib/kernels/*.cu)
if(NOT sources)
  message(FATAL_ERROR "no .cu files under ${SOURCE_DIR}/lib/kernels")
endif()
file(MAKE_DIRECTORY ${OUT_DIR})
set(commands)
set(objects)
foreach(source ${sources})
  get_filename_component(name ${source} NAME_WE)
  list(APPEND commands COMMAND ${NVCC} -c -std=c++17 --gpu-architecture=sm_90 --fmad=false -Xcompiler -fPIC
       -Werror all-warnings -I${SOURCE_DIR}/lib -o ${OUT_DIR}/${name}.o ${source})
  list(APPEND objects ${OUT_DIR}/${name}.o)
endforeach()
# Several COMMANDs run at the same time (as a pipeline; nvcc reads no input).
execute_process(${commands} RESULTS_VARIABLE statuses OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(failed)
foreach(source status IN ZIP_LISTS sources statuses)
  if(NOT status EQUAL 0)
    list(APPEND failed ${source})
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "nvcc failed on ${failed}:\n${out}${err}")
endif()
message("compiled ${sources}")
# Linking them together catches what each file alone cannot: a symbol defined
# in several of them (a non-inline function in a shared .cuh).
execute_process(
  COMMAND ${NVCC} -shared --gpu-architecture=sm_90 -o ${OUT_DIR}/libsjd_kernels_check.so ${objects}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "linking the kernels together failed:\n${out}${err}")
endif()
message("linked ${OUT_DIR}/libsjd_kernels_check.so")
