# KIMI_SANITIZE=ON: ASan + UBSan everywhere (the `sanitize` build under build-asan/).
if(KIMI_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
