# Finds Debian's libstb-dev: headers under include/stb and the compiled libstb
# that carries the implementations (so no translation unit defines *_IMPLEMENTATION).
find_path(Stb_INCLUDE_DIR stb_image_write.h PATH_SUFFIXES stb)
find_library(Stb_LIBRARY NAMES stb)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Stb REQUIRED_VARS Stb_INCLUDE_DIR Stb_LIBRARY)
if(Stb_FOUND AND NOT TARGET Stb::Stb)
  add_library(Stb::Stb UNKNOWN IMPORTED)
  set_target_properties(Stb::Stb PROPERTIES
    IMPORTED_LOCATION "${Stb_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Stb_INCLUDE_DIR}")
endif()
