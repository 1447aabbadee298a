# KIMI_FUZZ=ON: the libFuzzer build (the `build-fuzz` directory, `make build-fuzz` / `make fuzz`).
# Clang only. Every library is compiled with libFuzzer's coverage hooks plus ASan + UBSan
# (-fsanitize=fuzzer-no-link,address,undefined; UB aborts, so the fuzzer records it as a crash);
# the targets under fuzz/ link libFuzzer's main (-fsanitize=fuzzer). apps/ and tests/ are not
# configured in this build (see the top-level CMakeLists.txt).
if(KIMI_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KIMI_FUZZ=ON needs clang (libFuzzer): configure with CC=clang CXX=clang++ (got ${CMAKE_CXX_COMPILER_ID})")
  endif()
  if(KIMI_SANITIZE)
    message(FATAL_ERROR "KIMI_FUZZ=ON already sanitizes: leave KIMI_SANITIZE off")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
                      # why: warnings.cmake names GCC-only warnings (-Wno-restrict, -Wno-maybe-uninitialized)
                      -Wno-unknown-warning-option)
  add_link_options(-fsanitize=address,undefined)
endif()
