# `cpack -G DEB` (or TGZ) from the build folder. One Debian package per
# install component:
#   zeromem              bin/zeromem, share/zeromem/data, completions, man page.
#                        libc only (libstdc++ is linked statically,
#                        ZEROMEM_STATIC_LIBSTDCXX): no MPI, no CUDA.
#   zeromem-gui          bin/zeromem-gui; Qt 6 through dpkg-shlibdeps.
#   zeromem-measure      libexec/zeromem/zeromem-measure, which zeromem execs
#                        for measure/validate: MPI host backend; OpenMPI
#                        through dpkg-shlibdeps.
#   zeromem-measure-cuda libexec/zeromem/zeromem-measure-cuda.so, the cuda
#                        backend loaded for --backend cuda. It needs libcudart,
#                        libcublas and libnccl of the CUDA Toolkit, which no
#                        Debian package provides: dpkg-shlibdeps is told where
#                        they are (private dirs) and names only Debian ones.
# Each package holds only what was built (no GUI without Qt, no cuda
# package without CUDA + NCCL, no measure packages without MPI).
set(CPACK_PACKAGE_NAME "zeromem")
set(CPACK_PACKAGE_VENDOR "zeromem")
set(CPACK_PACKAGE_CONTACT "zeromem maintainers <zeromem@localhost>")
# Each package's description: its first line is the summary (so
# CPACK_PACKAGE_DESCRIPTION_SUMMARY, which CPack would put before every
# package's, is left unset).
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEB_COMPONENT_INSTALL ON)

set(CPACK_COMPONENTS_ALL zeromem)
if(TARGET zeromem-gui)
  list(APPEND CPACK_COMPONENTS_ALL zeromem-gui)
endif()
if(TARGET zeromem-measure)
  list(APPEND CPACK_COMPONENTS_ALL zeromem-measure)
endif()
if(TARGET zeromem_cuda_backend)
  list(APPEND CPACK_COMPONENTS_ALL zeromem-measure-cuda)
endif()

set(ZEROMEM_DEB_SAME "(= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_ZEROMEM_PACKAGE_NAME "zeromem")
set(CPACK_DEBIAN_ZEROMEM_DESCRIPTION "GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch
The zeromem command line: estimate, compare, plan, fit, check, simulate and
validate --measurement, with its presets, shell completions and man page.
It needs no MPI and no CUDA; measure and validate of a fresh run need the
zeromem-measure package.")
set(CPACK_DEBIAN_ZEROMEM_PACKAGE_SUGGESTS "zeromem-measure, zeromem-gui")

set(CPACK_DEBIAN_ZEROMEM-GUI_PACKAGE_NAME "zeromem-gui")
set(CPACK_DEBIAN_ZEROMEM-GUI_PACKAGE_DEPENDS "zeromem ${ZEROMEM_DEB_SAME}")
set(CPACK_DEBIAN_ZEROMEM-GUI_DESCRIPTION "Qt 6 GUI of zeromem
zeromem-gui: the estimator, planner and the simulator's memory timeline in
a window. Uses the presets of the zeromem package.")

set(CPACK_DEBIAN_ZEROMEM-MEASURE_PACKAGE_NAME "zeromem-measure")
set(CPACK_DEBIAN_ZEROMEM-MEASURE_PACKAGE_DEPENDS "zeromem ${ZEROMEM_DEB_SAME}, openmpi-bin")
set(CPACK_DEBIAN_ZEROMEM-MEASURE_PACKAGE_RECOMMENDS "zeromem-measure-cuda")
set(CPACK_DEBIAN_ZEROMEM-MEASURE_DESCRIPTION "zeromem measure and zeromem validate: real ZeRO steps under mpirun
The helper zeromem runs for measure and validate (libexec/zeromem/
zeromem-measure): partitioned ZeRO-0..3 steps measured per rank and phase.
This package runs the host backend (MPI, CPU memory). --backend cuda needs
the zeromem-measure-cuda package and the CUDA Toolkit's libraries.")

set(CPACK_DEBIAN_ZEROMEM-MEASURE-CUDA_PACKAGE_NAME "zeromem-measure-cuda")
set(CPACK_DEBIAN_ZEROMEM-MEASURE-CUDA_PACKAGE_DEPENDS "zeromem-measure ${ZEROMEM_DEB_SAME}")
set(CPACK_DEBIAN_ZEROMEM-MEASURE-CUDA_DESCRIPTION "cuda backend of zeromem measure (CUDA, NCCL, cuBLAS)
zeromem-measure-cuda.so, loaded by zeromem-measure for --backend cuda (and
--backend auto when a device is usable). It needs libcudart, libcublas and
libnccl from the NVIDIA CUDA Toolkit and NCCL, which are not Debian
packages and so are not listed as dependencies: install them from NVIDIA
(its run path names the build's ${CUDAToolkit_LIBRARY_DIR}). Without them
zeromem measure runs the host backend and says why.")

# Dependencies from the binaries (libc, Qt 6, OpenMPI). The CUDA libraries
# belong to no Debian package: searched as private libraries, so that
# dpkg-shlibdeps names only the Debian ones.
find_program(ZEROMEM_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(ZEROMEM_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  if(TARGET zeromem_cuda_backend)
    set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${CUDAToolkit_LIBRARY_DIR}" "${ZEROMEM_NCCL_LIB_DIR}")
  endif()
endif()
set(CPACK_GENERATOR "TGZ")
find_program(ZEROMEM_DPKG dpkg)
if(ZEROMEM_DPKG)
  list(APPEND CPACK_GENERATOR "DEB")
endif()
include(CPack)
