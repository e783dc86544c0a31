# Finds Debian's libsentencepiece-dev (the processor, not the trainer): the
# LlamaGen text encoder's tokenizer (see lib/text/spm_tokenizer.h).
# Defines SentencePiece::SentencePiece.
find_path(SentencePiece_INCLUDE_DIR sentencepiece_processor.h)
find_library(SentencePiece_LIBRARY NAMES sentencepiece)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SentencePiece REQUIRED_VARS SentencePiece_INCLUDE_DIR SentencePiece_LIBRARY)
if(SentencePiece_FOUND AND NOT TARGET SentencePiece::SentencePiece)
  add_library(SentencePiece::SentencePiece UNKNOWN IMPORTED)
  set_target_properties(SentencePiece::SentencePiece PROPERTIES
    IMPORTED_LOCATION "${SentencePiece_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SentencePiece_INCLUDE_DIR}")
endif()
mark_as_advanced(SentencePiece_INCLUDE_DIR SentencePiece_LIBRARY)
