// The runtime's backend interface: memory with per-category accounting, the
// collectives, the matrix product, the Adam update, element-wise kernels and
// timers. Implemented once for `host` (CPU memory, MPI, Eigen) and once for
// `cuda` (device memory, NCCL, cuBLAS, CUDA kernels). The ZeRO stages and the
// synthetic model are written once against this interface (shaped like
// nccl-tests: one harness, one small file per thing exercised).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace zeromem::runtime {

/// What a tensor is for. Model states (ZeRO paper Sec. 3.1): parameters,
/// gradients, optimizer_states (fp32 master + Adam m and v). Residual states
/// (Sec. 3.2): activations (saved for backward), buffers (IPG buckets,
/// gathered ZeRO-3 parameters, step temporaries: the estimator's
/// temporary_buffers) and workspace (transients the estimator does not model:
/// activation gradients, one layer's forward temporaries, autograd's
/// param.grad before it is copied into a bucket).
enum class Category { parameters, gradients, optimizer_states, activations, buffers, workspace };
constexpr int kCategories = 6;
/// "parameters", "gradients", ...
const char* to_string(Category c);

/// Where bytes live: the accelerator (on the host backend, ordinary process
/// memory standing in for it), pageable host memory, or pinned host memory.
enum class Where { device, host, pinned };
constexpr int kWheres = 3;
const char* to_string(Where w);

/// Element types: 16-bit floats are stored as their bit patterns.
enum class DType { f32, f16, bf16, u8 };
/// Bytes per element: 4, 2, 2, 1.
inline int dtype_size(DType d) { return d == DType::f32 ? 4 : (d == DType::u8 ? 1 : 2); }

/// A tensor owned by the caller and released with Backend::free. `numel`
/// elements of `dtype`; `data` is device or host memory per `where`.
struct Tensor {
    void* data = nullptr;
    int64_t numel = 0;
    DType dtype = DType::f32;
    Category category = Category::workspace;
    Where where = Where::device;
    uint64_t bytes() const { return static_cast<uint64_t>(numel) * static_cast<uint64_t>(dtype_size(dtype)); }
    bool empty() const { return data == nullptr; }
};

/// A non-owning view of elements [off, off+n) of `base` (never freed).
inline Tensor view(const Tensor& base, int64_t off, int64_t n) {
    Tensor t = base;
    t.data = static_cast<char*>(base.data) + off * dtype_size(base.dtype);
    t.numel = n;
    return t;
}

/// The bytes PyTorch's CachingHostAllocator reserves and pins for a request
/// of `bytes`: c10::llvm::PowerOf2Ceil (aten/src/ATen/core/
/// CachingHostAllocator.h allocate(), PyTorch >= 1.11). DeepSpeed pins its
/// offload buffers through torch (accelerator pin_memory ->
/// Tensor.pin_memory), so the runtime reserves and accounts pinned tensors at
/// this size. 0 and 1 stay as they are.
uint64_t pinned_block_bytes(uint64_t bytes);

/// Bytes a tensor reserves: its bytes, or pinned_block_bytes for pinned ones.
uint64_t reserved_bytes(const Tensor& t);

/// Thrown when an allocation fails (or exceeds the emulated capacity): a
/// result of the measurement, not a crash.
class OutOfMemory : public std::runtime_error {
public:
    OutOfMemory(const std::string& what, uint64_t requested, Category c, Where w)
        : std::runtime_error(what), requested_bytes(requested), category(c), where(w) {}
    uint64_t requested_bytes;
    Category category;
    Where where;
};

/// Bytes per (where, category): current and peak since the last reset.
struct Usage {
    std::array<std::array<uint64_t, kCategories>, kWheres> current{};
    std::array<std::array<uint64_t, kCategories>, kWheres> peak{};
    std::array<uint64_t, kWheres> total_current{};  ///< all categories of one place
    std::array<uint64_t, kWheres> total_peak{};
};

/// Hyper-parameters of one Adam(W) update (Loshchilov & Hutter 2019).
struct AdamParams {
    float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
    int step = 1;  ///< 1-based, for the bias correction
};

/// The backend. Element offsets and counts are in elements of the tensor's
/// dtype. Collectives run over all ranks of the job (MPI_COMM_WORLD) and sum.
/// Errors: OutOfMemory from alloc; std::runtime_error for a failed call.
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    /// The accelerator's name ("host CPU" on the host backend).
    virtual std::string device_name() const = 0;
    int rank() const { return rank_; }
    int world() const { return world_; }

    /// Allocates `numel` elements and accounts them under (where, category).
    /// Throws OutOfMemory when the allocation fails or would exceed the
    /// device capacity set by set_device_capacity.
    Tensor alloc(int64_t numel, DType dtype, Category category, Where where = Where::device);
    /// Releases `t` (no-op when empty) and clears it.
    void free(Tensor& t);
    /// Caps device bytes (emulates a device of that size; 0 = no cap).
    void set_device_capacity(uint64_t bytes) { capacity_ = bytes; }
    /// Caps the bytes of every place together (device, host and pinned):
    /// the host backend's share of the machine's MemAvailable, so that a
    /// run too large for the machine ends as an OutOfMemory result before
    /// the allocation instead of being killed by the kernel (0 = no cap).
    /// `why` says where the cap comes from, for the OOM message.
    void set_total_capacity(uint64_t bytes, const std::string& why) {
        total_capacity_ = bytes;
        total_capacity_why_ = why;
    }
    const Usage& usage() const { return usage_; }
    /// Peaks restart from the current values (at a phase boundary).
    void reset_peaks();

    /// Device memory in use as the device reports it (cudaMemGetInfo total -
    /// free), bytes; 0 where there is no such report (host backend).
    virtual uint64_t device_reported_used() { return 0; }
    /// Host resident-set high-water mark since the last reset, bytes
    /// (/proc/self/status VmHWM; reset by writing 5 to /proc/self/clear_refs).
    static uint64_t host_rss_peak();
    static void reset_host_rss_peak();

    // --- compute (16-bit operands are computed in fp32 and rounded) ---------
    /// C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C, row-major; op = transpose when t*.
    virtual void matmul(const Tensor& A, bool ta, const Tensor& B, bool tb, Tensor& C, int64_t m, int64_t n,
                        int64_t k, float alpha, float beta) = 0;
    /// dst[doff..+n] = src[soff..+n] (converting dtypes).
    virtual void copy(Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n) = 0;
    /// dst[doff..+n] += alpha * src[soff..+n].
    virtual void axpy(Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n, float alpha) = 0;
    /// t[off..+n] *= alpha.
    virtual void scale(Tensor& t, int64_t off, int64_t n, float alpha) = 0;
    /// t[off..+n] = value.
    virtual void fill(Tensor& t, int64_t off, int64_t n, float value) = 0;
    /// t = uniform(-scale, scale) from `seed` (same on every rank for the same seed).
    virtual void fill_random(Tensor& t, uint64_t seed, float scale) = 0;
    /// y = x * w[col] for a rows x cols x (norm weight as a per-column scale).
    virtual void scale_columns(Tensor& y, const Tensor& x, const Tensor& w, int64_t rows, int64_t cols) = 0;
    /// y = silu(x) (SiLU / swish); the MLP activation.
    virtual void silu(Tensor& y, const Tensor& x) = 0;
    /// dx = dy * silu'(x).
    virtual void silu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) = 0;
    /// out = a * b element-wise.
    virtual void mul(Tensor& out, const Tensor& a, const Tensor& b) = 0;
    /// Adam(W) on fp32 master/grad/m/v ranges [off, off+n) (DeepSpeed
    /// FusedAdam / DeepSpeedCPUAdam semantics). Tensors in host memory
    /// (offload_optimizer: cpu) are updated on the CPU.
    virtual void adam(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v, int64_t off, int64_t n,
                      const AdamParams& p) = 0;

    // --- collectives (sum), MPI_COMM_WORLD order of ranks -------------------
    /// In place on t[off..+n].
    virtual void all_reduce(Tensor& t, int64_t off, int64_t n) = 0;
    /// out[ooff + r*n ..] = in[ioff..+n] of rank r.
    virtual void all_gather(const Tensor& in, int64_t ioff, Tensor& out, int64_t ooff, int64_t n) = 0;
    /// out[ooff..+n] = sum over ranks of in[ioff + rank*n ..+n].
    virtual void reduce_scatter(const Tensor& in, int64_t ioff, Tensor& out, int64_t ooff, int64_t n) = 0;
    virtual void barrier() = 0;
    /// Waits for queued work (device stream); a no-op on the host.
    virtual void synchronize() {}
    /// Seconds on a monotonic clock after synchronize() (CUDA events on cuda).
    virtual double now();

protected:
    /// Raw allocation; returns nullptr on failure.
    virtual void* raw_alloc(uint64_t bytes, Where where) = 0;
    virtual void raw_free(void* p, Where where) = 0;
    int rank_ = 0;
    int world_ = 1;

private:
    Usage usage_;
    uint64_t capacity_ = 0;
    uint64_t total_capacity_ = 0;
    std::string total_capacity_why_;
};

/// The host backend: CPU memory, MPI collectives, Eigen matrix products.
/// MPI must be initialised.
std::unique_ptr<Backend> make_host_backend();
/// The CUDA backend (one process per GPU: device = local rank), or nullptr
/// with `why` set when it is not built or no device is usable.
std::unique_ptr<Backend> make_cuda_backend(std::string& why);

}  // namespace zeromem::runtime
