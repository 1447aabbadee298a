# Warnings as errors on our own code (not on system headers).
function(kimi_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-unused-parameter -Wno-restrict -ffp-contract=off)
  # note: -Wno-restrict: GCC 12 false positives on std::string concatenation at -O3 (GCC PR 105329).
  if(KIMI_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()
