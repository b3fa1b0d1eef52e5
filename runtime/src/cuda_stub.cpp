// make_cuda_backend when the runtime is built without CUDA and NCCL.
#include "zeromem/runtime/backend.h"

namespace zeromem::runtime {

std::unique_ptr<Backend> make_cuda_backend(std::string& why) {
    why = "zeromem was built without the CUDA backend (CUDA Toolkit and NCCL not found at configure time)";
    return nullptr;
}

}  // namespace zeromem::runtime
