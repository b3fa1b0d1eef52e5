// The cuda backend: device memory through a tracking allocator (cudaMalloc,
// accounted per category by Backend::alloc) plus cudaMemGetInfo for what the
// device reports (context, NCCL and cuBLAS workspaces); pinned host memory
// (cudaHostAlloc) for offload; NCCL collectives on a communicator
// bootstrapped by broadcasting ncclUniqueId over MPI; cuBLAS (cublasGemmEx,
// fp32 accumulation) for the matrix products; small CUDA kernels for Adam
// and the element-wise parts; CUDA events for timing. One process per GPU
// (device = rank within the node). Collectives wait by polling the stream
// and ncclCommGetAsyncError; an asynchronous NCCL error or a stall past the
// timeout aborts the communicator (ncclCommAbort) and throws, so the harness
// aborts every rank (as nccl-tests src/common.cu testStreamSynchronize does;
// ncclCommGetAsyncError / ncclCommAbort in NCCL's nccl.h).
// Built as the module zeromem-measure-cuda.so, which zeromem-measure loads
// only when the cuda backend is asked for (cuda_loader.cpp): the helper
// itself then needs no CUDA library.
#include "zeromem/runtime/backend.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace zeromem::runtime {

namespace {

void cuda_check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void blas_check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(int(s)));
}

__device__ __forceinline__ float ld(const void* p, int dt, int64_t i) {
    switch (dt) {
        case 0: return static_cast<const float*>(p)[i];
        case 1: return __half2float(static_cast<const __half*>(p)[i]);
        case 2: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
        default: return static_cast<float>(static_cast<const unsigned char*>(p)[i]);
    }
}
__device__ __forceinline__ void st(void* p, int dt, int64_t i, float v) {
    switch (dt) {
        case 0: static_cast<float*>(p)[i] = v; break;
        case 1: static_cast<__half*>(p)[i] = __float2half(v); break;
        case 2: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v); break;
        default: static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v); break;
    }
}

// op: 0 copy, 1 axpy, 2 scale, 3 fill, 4 silu, 5 silu backward, 6 mul, 7 random
__global__ void elementwise(int op, void* d, int dd, const void* a, int da, const void* b, int db, int64_t n,
                            float alpha, unsigned long long seed) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        switch (op) {
            case 0: st(d, dd, i, ld(a, da, i)); break;
            case 1: st(d, dd, i, ld(d, dd, i) + alpha * ld(a, da, i)); break;
            case 2: st(d, dd, i, alpha * ld(d, dd, i)); break;
            case 3: st(d, dd, i, alpha); break;
            case 4: { const float x = ld(a, da, i); st(d, dd, i, x / (1.0f + __expf(-x))); break; }
            case 5: {
                const float x = ld(b, db, i), s = 1.0f / (1.0f + __expf(-x));
                st(d, dd, i, ld(a, da, i) * s * (1.0f + x * (1.0f - s)));
                break;
            }
            case 6: st(d, dd, i, ld(a, da, i) * ld(b, db, i)); break;
            case 7: {
                unsigned long long z = seed + static_cast<unsigned long long>(i) * 0x9E3779B97F4A7C15ULL;
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
                z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
                z ^= z >> 31;
                st(d, dd, i, alpha * (2.0f * static_cast<float>(z >> 40) / 16777216.0f - 1.0f));
                break;
            }
        }
    }
}

__global__ void scale_cols_kernel(void* y, int dy, const void* x, int dx, const void* w, int dw, int64_t rows,
                                  int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        st(y, dy, i, ld(x, dx, i) * ld(w, dw, i % cols));
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, int64_t n, float lr, float b1, float b2,
                            float eps, float wd, float bc1, float bc2) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        w[i] -= lr * ((m[i] / bc1) / (sqrtf(v[i] / bc2) + eps) + wd * w[i]);
    }
}

int dt(DType d) { return d == DType::f32 ? 0 : d == DType::f16 ? 1 : d == DType::bf16 ? 2 : 3; }
ncclDataType_t nccl_type(DType d) {
    switch (d) {
        case DType::f32: return ncclFloat;
        case DType::f16: return ncclHalf;
        case DType::bf16: return ncclBfloat16;
        case DType::u8: return ncclUint8;
    }
    return ncclFloat;
}
cudaDataType_t blas_type(DType d) {
    return d == DType::f32 ? CUDA_R_32F : d == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
}
char* at(const Tensor& t, int64_t off) { return static_cast<char*>(t.data) + off * dtype_size(t.dtype); }
bool device_visible(const Tensor& t) { return t.where != Where::host; }  // device or pinned (UVA)

// Host-side element access for pageable tensors (offloaded optimizer states).
float hload(const Tensor& t, int64_t i) {
    if (t.dtype == DType::f32) return static_cast<const float*>(t.data)[i];
    if (t.dtype == DType::bf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(t.data)[i]);
    if (t.dtype == DType::f16) return __half2float(static_cast<const __half*>(t.data)[i]);
    return static_cast<const unsigned char*>(t.data)[i];
}
void hstore(Tensor& t, int64_t i, float v) {
    if (t.dtype == DType::f32) static_cast<float*>(t.data)[i] = v;
    else if (t.dtype == DType::bf16) static_cast<__nv_bfloat16*>(t.data)[i] = __float2bfloat16(v);
    else if (t.dtype == DType::f16) static_cast<__half*>(t.data)[i] = __float2half(v);
    else static_cast<unsigned char*>(t.data)[i] = static_cast<unsigned char>(v);
}

class CudaBackend final : public Backend {
public:
    CudaBackend(int device) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &world_);
        cuda_check(cudaSetDevice(device), "cudaSetDevice");
        cudaDeviceProp prop{};
        cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
        name_ = prop.name;
        cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
        blas_check(cublasCreate(&blas_), "cublasCreate");
        blas_check(cublasSetStream(blas_, stream_), "cublasSetStream");
        ncclUniqueId id;
        if (rank_ == 0 && ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error("ncclGetUniqueId failed");
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;  // non-blocking: errors are polled, the communicator can be aborted
        ncclResult_t r = ncclCommInitRankConfig(&comm_, world_, id, rank_, &cfg);
        wait_nccl(r, "ncclCommInitRank");
        cuda_check(cudaEventCreate(&base_), "cudaEventCreate");
        cuda_check(cudaEventCreate(&mark_), "cudaEventCreate");
        cuda_check(cudaEventRecord(base_, stream_), "cudaEventRecord");
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        baseline_used_ = tot - fr;
    }
    ~CudaBackend() override {
        cudaStreamSynchronize(stream_);
        if (comm_ != nullptr) ncclCommDestroy(comm_);
        cublasDestroy(blas_);
        cudaEventDestroy(base_);
        cudaEventDestroy(mark_);
        cudaStreamDestroy(stream_);
    }
    std::string name() const override { return "cuda"; }
    std::string device_name() const override { return name_; }
    uint64_t device_reported_used() override {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return 0;
        return tot - fr;
    }
    void synchronize() override { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
    double now() override {
        cuda_check(cudaEventRecord(mark_, stream_), "cudaEventRecord");
        cuda_check(cudaEventSynchronize(mark_), "cudaEventSynchronize");
        float ms = 0;
        cuda_check(cudaEventElapsedTime(&ms, base_, mark_), "cudaEventElapsedTime");
        return ms / 1000.0;
    }

    void matmul(const Tensor& A, bool ta, const Tensor& B, bool tb, Tensor& C, int64_t m, int64_t n, int64_t k,
                float alpha, float beta) override {
        // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
        blas_check(cublasGemmEx(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m),
                                int(k), &alpha, B.data, blas_type(B.dtype), int(tb ? k : n), A.data, blas_type(A.dtype),
                                int(ta ? m : k), &beta, C.data, blas_type(C.dtype), int(n), CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
    }
    void copy(Tensor& d, int64_t doff, const Tensor& s, int64_t soff, int64_t n) override {
        if (n == 0) return;
        if (d.dtype == s.dtype) {
            cuda_check(cudaMemcpyAsync(at(d, doff), at(s, soff), size_t(n) * dtype_size(d.dtype), cudaMemcpyDefault,
                                       stream_), "cudaMemcpyAsync");
            if (!device_visible(d) || !device_visible(s)) synchronize();
            return;
        }
        if (device_visible(d) && device_visible(s)) return launch(0, d, doff, &s, soff, nullptr, n, 0.0f);
        host_path(d, doff, s, soff, n, false, 1.0f);
    }
    void axpy(Tensor& d, int64_t doff, const Tensor& s, int64_t soff, int64_t n, float alpha) override {
        if (device_visible(d) && device_visible(s)) return launch(1, d, doff, &s, soff, nullptr, n, alpha);
        host_path(d, doff, s, soff, n, true, alpha);
    }
    void scale(Tensor& t, int64_t off, int64_t n, float alpha) override {
        if (!device_visible(t)) {
            for (int64_t i = 0; i < n; ++i) hstore(t, off + i, alpha * hload(t, off + i));
            return;
        }
        launch(2, t, off, nullptr, 0, nullptr, n, alpha);
    }
    void fill(Tensor& t, int64_t off, int64_t n, float value) override {
        if (!device_visible(t)) {
            for (int64_t i = 0; i < n; ++i) hstore(t, off + i, value);
            return;
        }
        launch(3, t, off, nullptr, 0, nullptr, n, value);
    }
    void fill_random(Tensor& t, uint64_t seed, float scale) override {
        elementwise<<<blocks(t.numel), 256, 0, stream_>>>(7, t.data, dt(t.dtype), nullptr, 0, nullptr, 0, t.numel,
                                                          scale, seed);
        cuda_check(cudaGetLastError(), "fill_random kernel");
    }
    void scale_columns(Tensor& y, const Tensor& x, const Tensor& w, int64_t rows, int64_t cols) override {
        scale_cols_kernel<<<blocks(rows * cols), 256, 0, stream_>>>(y.data, dt(y.dtype), x.data, dt(x.dtype), w.data,
                                                                    dt(w.dtype), rows, cols);
        cuda_check(cudaGetLastError(), "scale_columns kernel");
    }
    void silu(Tensor& y, const Tensor& x) override { launch(4, y, 0, &x, 0, nullptr, x.numel, 0.0f); }
    void silu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) override {
        launch(5, dx, 0, &dy, 0, &x, x.numel, 0.0f);
    }
    void mul(Tensor& out, const Tensor& a, const Tensor& b) override { launch(6, out, 0, &a, 0, &b, out.numel, 0.0f); }
    void adam(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v, int64_t off, int64_t n,
              const AdamParams& p) override {
        const float bc1 = 1.0f - std::pow(p.beta1, float(p.step)), bc2 = 1.0f - std::pow(p.beta2, float(p.step));
        float* w = reinterpret_cast<float*>(at(master, off));
        const float* g = reinterpret_cast<const float*>(at(grad, off));
        float* mm = reinterpret_cast<float*>(at(m, off));
        float* vv = reinterpret_cast<float*>(at(v, off));
        if (master.where == Where::host) {  // DeepSpeedCPUAdam's place: the CPU
            synchronize();
            for (int64_t i = 0; i < n; ++i) {
                mm[i] = p.beta1 * mm[i] + (1.0f - p.beta1) * g[i];
                vv[i] = p.beta2 * vv[i] + (1.0f - p.beta2) * g[i] * g[i];
                w[i] -= p.lr * ((mm[i] / bc1) / (std::sqrt(vv[i] / bc2) + p.eps) + p.weight_decay * w[i]);
            }
            return;
        }
        adam_kernel<<<blocks(n), 256, 0, stream_>>>(w, g, mm, vv, n, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay,
                                                    bc1, bc2);
        cuda_check(cudaGetLastError(), "adam kernel");
    }

    void all_reduce(Tensor& t, int64_t off, int64_t n) override {
        wait_nccl(ncclAllReduce(at(t, off), at(t, off), size_t(n), nccl_type(t.dtype), ncclSum, comm_, stream_),
                  "ncclAllReduce");
    }
    void all_gather(const Tensor& in, int64_t ioff, Tensor& out, int64_t ooff, int64_t n) override {
        wait_nccl(ncclAllGather(at(in, ioff), at(out, ooff), size_t(n), nccl_type(in.dtype), comm_, stream_),
                  "ncclAllGather");
    }
    void reduce_scatter(const Tensor& in, int64_t ioff, Tensor& out, int64_t ooff, int64_t n) override {
        if (in.dtype != out.dtype) throw std::runtime_error("reduce_scatter: input and output dtypes differ");
        wait_nccl(ncclReduceScatter(at(in, ioff), at(out, ooff), size_t(n), nccl_type(in.dtype), ncclSum, comm_,
                                    stream_), "ncclReduceScatter");
    }
    void barrier() override {
        synchronize();
        MPI_Barrier(MPI_COMM_WORLD);
    }

protected:
    void* raw_alloc(uint64_t bytes, Where where) override {
        void* p = nullptr;
        if (where == Where::device) {
            if (cudaMalloc(&p, bytes) != cudaSuccess) {
                cudaGetLastError();  // clear the sticky-free allocation error
                return nullptr;
            }
            cudaMemsetAsync(p, 0, bytes, stream_);
        } else if (where == Where::pinned) {
            if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
                cudaGetLastError();
                return nullptr;
            }
            std::memset(p, 0, bytes);
        } else {
            p = std::malloc(bytes);
            if (p != nullptr) std::memset(p, 0, bytes);
        }
        return p;
    }
    void raw_free(void* p, Where where) override {
        if (where == Where::device) {
            cudaStreamSynchronize(stream_);
            cudaFree(p);
        } else if (where == Where::pinned) {
            cudaStreamSynchronize(stream_);
            cudaFreeHost(p);
        } else {
            std::free(p);
        }
    }

private:
    static unsigned blocks(int64_t n) { return unsigned(std::min<int64_t>((n + 255) / 256, 65535)) + (n == 0); }
    void launch(int op, Tensor& d, int64_t doff, const Tensor* a, int64_t aoff, const Tensor* b, int64_t n, float alpha) {
        if (n == 0) return;
        elementwise<<<blocks(n), 256, 0, stream_>>>(op, at(d, doff), dt(d.dtype), a ? at(*a, aoff) : nullptr,
                                                    a ? dt(a->dtype) : 0, b ? at(*b, 0) : nullptr, b ? dt(b->dtype) : 0,
                                                    n, alpha, 0ULL);
        cuda_check(cudaGetLastError(), "element-wise kernel");
    }
    // Copy/axpy where one side is pageable host memory: through host staging.
    void host_path(Tensor& d, int64_t doff, const Tensor& s, int64_t soff, int64_t n, bool add, float alpha) {
        synchronize();
        const int es = dtype_size(s.dtype), ed = dtype_size(d.dtype);
        std::vector<char> sb(size_t(n) * es), db(size_t(n) * ed);
        cuda_check(cudaMemcpy(sb.data(), at(s, soff), sb.size(), cudaMemcpyDefault), "cudaMemcpy");
        if (add) cuda_check(cudaMemcpy(db.data(), at(d, doff), db.size(), cudaMemcpyDefault), "cudaMemcpy");
        Tensor ts = s, td = d;
        ts.data = sb.data();
        td.data = db.data();
        for (int64_t i = 0; i < n; ++i) hstore(td, i, (add ? hload(td, i) : 0.0f) + alpha * hload(ts, i));
        cuda_check(cudaMemcpy(at(d, doff), db.data(), db.size(), cudaMemcpyDefault), "cudaMemcpy");
    }
    // Polls the stream and NCCL's asynchronous error; aborts the communicator
    // on an error or after the timeout (ZEROMEM_NCCL_TIMEOUT seconds, 300).
    void wait_nccl(ncclResult_t r, const char* what) {
        const char* env = std::getenv("ZEROMEM_NCCL_TIMEOUT");
        const double timeout = env ? std::atof(env) : 300.0;
        const auto t0 = std::chrono::steady_clock::now();
        for (;;) {
            ncclResult_t async = ncclSuccess;
            if (comm_ != nullptr) ncclCommGetAsyncError(comm_, &async);
            if (r != ncclSuccess && r != ncclInProgress) async = r;
            if (async != ncclSuccess && async != ncclInProgress) {
                if (comm_ != nullptr) ncclCommAbort(comm_);
                comm_ = nullptr;
                throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(async));
            }
            const bool init_done = async == ncclSuccess;
            if (init_done && cudaStreamQuery(stream_) == cudaSuccess) return;
            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout) {
                if (comm_ != nullptr) ncclCommAbort(comm_);
                comm_ = nullptr;
                throw std::runtime_error(std::string(what) + " made no progress for " + std::to_string(timeout) +
                                         " s; NCCL communicator aborted");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            r = ncclSuccess;
        }
    }
    std::string name_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    ncclComm_t comm_ = nullptr;
    cudaEvent_t base_ = nullptr, mark_ = nullptr;
    uint64_t baseline_used_ = 0;
};

std::unique_ptr<Backend> open_cuda_backend(std::string& why) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        why = std::string("CUDA: ") + cudaGetErrorString(e);  // "no CUDA-capable device", "insufficient driver"
        cudaGetLastError();
        return nullptr;
    }
    if (count == 0) {
        why = "CUDA: no device";
        return nullptr;
    }
    MPI_Comm local;
    int rank = 0, local_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_free(&local);
    return std::make_unique<CudaBackend>(local_rank % count);
}

}  // namespace

}  // namespace zeromem::runtime

// The module's entry point (cuda_loader.cpp looks it up): a new backend the
// caller owns, or nullptr with `*why` set when no device is usable.
extern "C" __attribute__((visibility("default"))) zeromem::runtime::Backend* zeromem_make_cuda_backend(std::string* why) {
    return zeromem::runtime::open_cuda_backend(*why).release();
}
