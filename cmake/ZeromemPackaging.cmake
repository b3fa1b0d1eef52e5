# `cpack -G DEB` (or TGZ) from the build folder: a Debian package of the
# installed files (bin/zeromem, share/zeromem/data, completions, man page).
set(CPACK_PACKAGE_NAME "zeromem")
set(CPACK_PACKAGE_VENDOR "zeromem")
set(CPACK_PACKAGE_CONTACT "zeromem maintainers <zeromem@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# libc only: libstdc++ is linked statically (ZEROMEM_STATIC_LIBSTDCXX); dpkg-shlibdeps finds the rest.
find_program(ZEROMEM_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(ZEROMEM_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
set(CPACK_GENERATOR "TGZ")
find_program(ZEROMEM_DPKG dpkg)
if(ZEROMEM_DPKG)
  list(APPEND CPACK_GENERATOR "DEB")
endif()
include(CPack)
