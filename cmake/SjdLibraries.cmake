# sjd_area(NAME [NO_PCH] DEPS...): one static library per folder of lib/, built
# from the folder's .cpp files, so each area compiles and is tested on its own.
# Areas that use ATen share one precompiled header (ATen is the slow include).
function(sjd_area name)
  cmake_parse_arguments(AREA "NO_PCH" "" "" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${name}/*.cpp)
  if(NOT sources)  # an area still being written: headers only
    add_library(sjd_${name} INTERFACE)
    target_include_directories(sjd_${name} INTERFACE ${PROJECT_SOURCE_DIR}/lib)
    target_link_libraries(sjd_${name} INTERFACE ${AREA_UNPARSED_ARGUMENTS})
    return()
  endif()
  add_library(sjd_${name} STATIC ${sources})
  target_include_directories(sjd_${name} PUBLIC ${PROJECT_SOURCE_DIR}/lib)
  target_link_libraries(sjd_${name} PUBLIC ${AREA_UNPARSED_ARGUMENTS})
  target_compile_options(sjd_${name} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(NOT AREA_NO_PCH)
    target_precompile_headers(sjd_${name} REUSE_FROM sjd_pch)
  endif()
endfunction()

# sjd_tests(AREA LIBS...): tests/AREA/*.cpp into one Catch2 program tests_AREA,
# each TEST_CASE registered with CTest.
function(sjd_tests area)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${area}/*.cpp)
  if(NOT sources)
    return()
  endif()
  add_executable(tests_${area} ${sources})
  target_link_libraries(tests_${area} PRIVATE ${ARGN} sjd_testing Catch2::Catch2WithMain)
  target_precompile_headers(tests_${area} REUSE_FROM sjd_pch)
  # -w NoTests: a CTest entry whose name filter matches no test case fails
  # instead of passing silently (a ';' in a test name would split it).
  catch_discover_tests(tests_${area}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    EXTRA_ARGS -w NoTests
    TEST_LIST tests_${area}_discovered)
  # The environment is set by a CTest script read after the discovered tests, not through
  # catch_discover_tests(PROPERTIES): that passes its list through a command line that splits
  # "A=1;B=2" into separate properties, so only the first variable reached the tests (the others
  # became junk property names). One OpenMP thread: two test processes each spinning two threads
  # on a 2-core machine ran 10-30 times slower and timed out a polling test. ONEDNN_MAX_CPU_ISA:
  # oneDNN's AMX kernels die with SIGILL on virtual machines that advertise AMX without enabling
  # its tile state (whole sjd processes were seen to die so in these tests); AVX512-BF16 works.
  set(environment_script ${CMAKE_CURRENT_BINARY_DIR}/tests_${area}_environment.cmake)
  file(WRITE ${environment_script}
    "if(tests_${area}_discovered)  # empty until the program is built\n"
    "  set_tests_properties(\${tests_${area}_discovered} PROPERTIES SKIP_REGULAR_EXPRESSION \"sjd-test-skipped: \" ENVIRONMENT "
    "\"SJD_BUILD_DIR=${PROJECT_BINARY_DIR};SJD_SOURCE_DIR=${PROJECT_SOURCE_DIR};OMP_NUM_THREADS=1;"
    "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16\")\nendif()\n")
  if(area STREQUAL "cuda")
    # One device case at a time: the memory cases read the GPU's free memory, which another
    # process's CUDA context (about 0.5 GB each) would move under them.
    file(APPEND ${environment_script}
      "if(tests_cuda_discovered)\n  set_tests_properties(\${tests_cuda_discovered} PROPERTIES RESOURCE_LOCK gpu)\nendif()\n")
  endif()
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${environment_script})
endfunction()
