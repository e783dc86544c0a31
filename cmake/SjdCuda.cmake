# CUDA sources are built only when the found Torch was built with CUDA (the GPU
# machine's PyTorch 2.11 wheel). On CPU machines nothing here is enabled.
set(SJD_WITH_CUDA OFF)
if(SJD_ENABLE_CUDA AND (TARGET torch_cuda OR CAFFE2_USE_CUDA))
  set(SJD_WITH_CUDA ON)
  enable_language(CUDA)
  message(STATUS "sjd: Torch has CUDA, CUDA sources enabled")
else()
  message(STATUS "sjd: Torch has no CUDA, CPU build")
endif()
