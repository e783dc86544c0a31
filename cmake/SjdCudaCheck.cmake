# CI on CPU machines: the CUDA kernels cannot be built into the program there
# (the CPU Torch has no CUDA), but every lib/kernels/*.cu must still compile
# with nvcc, so a compile error shows up before anyone reaches a GPU. Skipped,
# with a message, when no nvcc is installed; not registered when the kernels
# are built for real (SJD_WITH_CUDA).
if(SJD_WITH_CUDA)
  return()
endif()
find_program(SJD_NVCC nvcc HINTS /usr/local/cuda/bin)
add_test(NAME cuda.kernels_compile
         COMMAND ${CMAKE_COMMAND} -DNVCC=${SJD_NVCC} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DOUT_DIR=${PROJECT_BINARY_DIR}/cuda_compile_check
                 -P ${PROJECT_SOURCE_DIR}/cmake/SjdCudaCompileCheck.cmake)
set_tests_properties(cuda.kernels_compile PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: no nvcc")
