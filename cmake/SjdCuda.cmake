# CUDA sources are built only when the found Torch was built with CUDA (the GPU
# machine's PyTorch 2.11 wheel). On CPU machines nothing here is enabled; the
# kernels are then only compile-checked by a test (cmake/SjdCudaCheck.cmake).
set(SJD_WITH_CUDA OFF)
if(SJD_ENABLE_CUDA AND (TARGET torch_cuda OR CAFFE2_USE_CUDA))
  set(SJD_WITH_CUDA ON)
  # H100 / H200 unless the user asks for other architectures. A variable of our
  # own: Torch's CMake files set CMAKE_CUDA_ARCHITECTURES to OFF (nvcc's default,
  # sm_75) and take theirs from TORCH_CUDA_ARCH_LIST, which covers only their
  # own nvcc flags.
  set(SJD_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures lib/kernels is built for")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # The CUDA wheel's libtorch.so (2.11.0+cu130 from PyPI, GCC 13 on manylinux_2_28)
  # exports the std::filesystem functions it linked statically. Listed before
  # libstdc++, they override the system's for the whole program, and with an
  # older libstdc++ (GCC 12: Debian bookworm, Ubuntu 22.04) remove_all calls a
  # weak symbol that is missing there: a jump to address 0. Naming libstdc++
  # first keeps the system's definitions first.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_link_options(LINKER:--push-state,--no-as-needed -lstdc++ LINKER:--pop-state)
  endif()
  message(STATUS "sjd: Torch has CUDA, CUDA sources enabled (architectures ${SJD_CUDA_ARCHITECTURES})")
else()
  message(STATUS "sjd: Torch has no CUDA, CPU build")
endif()

# sjd_kernels: the .cu files of lib/kernels, over raw pointers (no ATen), with
# the shared CUDA runtime that Torch also uses. --fmad=false keeps a*b+c as two
# rounded operations, as on the CPU, so the verification kernels make the CPU
# reference's exact decisions.
function(sjd_add_kernels)
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/lib/kernels/*.cu)
  add_library(sjd_kernels STATIC ${sources})
  target_include_directories(sjd_kernels PUBLIC ${PROJECT_SOURCE_DIR}/lib)
  set_target_properties(sjd_kernels PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                        CUDA_ARCHITECTURES "${SJD_CUDA_ARCHITECTURES}"
                        CUDA_RUNTIME_LIBRARY Shared POSITION_INDEPENDENT_CODE ON)
  target_compile_options(sjd_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
  target_link_libraries(sjd_kernels PUBLIC CUDA::cudart)
endfunction()
