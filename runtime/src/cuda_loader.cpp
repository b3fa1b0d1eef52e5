// make_cuda_backend when the runtime is built with CUDA and NCCL: the cuda
// backend is the module zeromem-measure-cuda.so next to the executable
// (cuda_backend.cu), opened on first use. zeromem-measure so links no CUDA
// library: it runs the host backend where the CUDA Toolkit is missing, and
// --backend auto falls back to it with the loader's reason.
#include "zeromem/runtime/backend.h"

#include <dlfcn.h>

#include <filesystem>
#include <string>

namespace zeromem::runtime {

namespace {

constexpr const char* kModule = "zeromem-measure-cuda.so";

// The module beside this executable (build tree and installed libexec
// folder alike).
std::string module_path() {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ((ec ? std::filesystem::path(".") : self.parent_path()) / kModule).string();
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::string& why) {
    const std::string path = module_path();
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open: its backends live as long as the process
    if (lib == nullptr) {
        const char* err = ::dlerror();
        why = "the cuda backend " + path + " did not load (" + (err ? err : "unknown error") +
              "); it needs libcudart, libcublas and libnccl of the CUDA Toolkit (Debian: the zeromem-measure-cuda package)";
        return nullptr;
    }
    using Make = Backend* (*)(std::string*);
    const auto make = reinterpret_cast<Make>(::dlsym(lib, "zeromem_make_cuda_backend"));
    if (make == nullptr) {
        why = "the cuda backend " + path + " lacks zeromem_make_cuda_backend (another zeromem version?)";
        return nullptr;
    }
    return std::unique_ptr<Backend>(make(&why));
}

}  // namespace zeromem::runtime
