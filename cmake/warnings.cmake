# Warnings as errors on our own code (not on system headers).
function(kimi_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-unused-parameter -ffp-contract=off)
  if(KIMI_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()
