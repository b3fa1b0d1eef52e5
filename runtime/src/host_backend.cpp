// The host backend: the runtime's code path on CPU memory, with MPI
// collectives and Eigen matrix products, so partitioning and per-rank
// accounting run on any machine (CI included). "Device" and "pinned" memory
// are ordinary process memory here, accounted apart so the stages' placement
// (what DeepSpeed keeps on the GPU, in pinned or in pageable host memory)
// shows in the measurement.
#include "zeromem/runtime/backend.h"

#include <Eigen/Core>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <random>
#include <stdexcept>
#include <vector>

namespace zeromem::runtime {

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

inline float bf16_to_f32(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>(u >> 16);
}

float load(const Tensor& t, int64_t i) {
    switch (t.dtype) {
        case DType::f32: return static_cast<const float*>(t.data)[i];
        case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(t.data)[i]);
        case DType::f16: return static_cast<float>(static_cast<const Eigen::half*>(t.data)[i]);
        case DType::u8: return static_cast<float>(static_cast<const uint8_t*>(t.data)[i]);
    }
    return 0;
}
void store(Tensor& t, int64_t i, float v) {
    switch (t.dtype) {
        case DType::f32: static_cast<float*>(t.data)[i] = v; break;
        case DType::bf16: static_cast<uint16_t*>(t.data)[i] = f32_to_bf16(v); break;
        case DType::f16: static_cast<Eigen::half*>(t.data)[i] = Eigen::half(v); break;
        case DType::u8: static_cast<uint8_t*>(t.data)[i] = static_cast<uint8_t>(v); break;
    }
}

// fp32 view of a tensor range: the tensor itself for fp32, else a converted
// copy in backend scratch (not accounted: the backend's workspace, like a
// cuBLAS workspace).
const float* as_f32(const Tensor& t, int64_t off, int64_t n, std::vector<float>& scratch) {
    if (t.dtype == DType::f32) return static_cast<const float*>(t.data) + off;
    scratch.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) scratch[static_cast<size_t>(i)] = load(t, off + i);
    return scratch.data();
}

// The machine's MemAvailable in bytes (/proc/meminfo, Linux >= 3.14: the
// memory a new process can take without swapping); 0 when unknown. The test
// hook ZEROMEM_TEST_MEM_AVAILABLE=BYTES stands in for it.
uint64_t mem_available_bytes() {
    if (const char* t = std::getenv("ZEROMEM_TEST_MEM_AVAILABLE")) return std::strtoull(t, nullptr, 10);
    std::ifstream f("/proc/meminfo");
    std::string key;
    unsigned long long kb = 0;
    std::string unit;
    while (f >> key >> kb) {
        std::getline(f, unit);
        if (key == "MemAvailable:") return kb * 1024ULL;
    }
    return 0;
}

// Ranks of the job on this node (they share its memory).
int ranks_on_node() {
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    return n;
}

class HostBackend final : public Backend {
public:
    /// Every tensor of the host backend is host memory: each rank may hold
    /// 90% of MemAvailable (read once, at start; the smallest reading of
    /// all ranks) divided by the ranks on its
    /// node; an allocation beyond that is an OutOfMemory result, not a
    /// kernel OOM kill. The 10% leaves room for what the accounting does
    /// not see (MPI buffers, the fp32 scratch of bf16 matmuls).
    HostBackend() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &world_);
        // Every rank takes the smallest reading: ranks that read
        // MemAvailable at different moments would otherwise get different
        // limits, and one rank running out alone would leave the others
        // waiting in a collective it never joins.
        unsigned long long mine = mem_available_bytes(), avail = 0;
        MPI_Allreduce(&mine, &avail, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        const int local = ranks_on_node();
        if (avail > 0)
            set_total_capacity(avail / 10 * 9 / static_cast<uint64_t>(local),
                               "host backend: 90% of MemAvailable " + std::to_string(avail) + " B shared by " +
                                   std::to_string(local) + " ranks on this node");
    }
    std::string name() const override { return "host"; }
    std::string device_name() const override { return "host CPU (Eigen + MPI)"; }

    void matmul(const Tensor& A, bool ta, const Tensor& B, bool tb, Tensor& C, int64_t m, int64_t n, int64_t k,
                float alpha, float beta) override {
        const float* a = as_f32(A, 0, m * k, sa_);
        const float* b = as_f32(B, 0, k * n, sb_);
        Eigen::Map<const Mat> Am(a, ta ? k : m, ta ? m : k);
        Eigen::Map<const Mat> Bm(b, tb ? n : k, tb ? k : n);
        Mat prod;
        if (ta && tb) prod.noalias() = Am.transpose() * Bm.transpose();
        else if (ta) prod.noalias() = Am.transpose() * Bm;
        else if (tb) prod.noalias() = Am * Bm.transpose();
        else prod.noalias() = Am * Bm;
        if (C.dtype == DType::f32) {
            Eigen::Map<Mat> Cm(static_cast<float*>(C.data), m, n);
            Cm = alpha * prod + (beta == 0.0f ? Mat::Zero(m, n) : Mat(beta * Cm));
            return;
        }
        for (int64_t i = 0; i < m * n; ++i) {
            const float old = beta == 0.0f ? 0.0f : beta * load(C, i);
            store(C, i, alpha * prod.data()[i] + old);
        }
    }
    void copy(Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n) override {
        if (dst.dtype == src.dtype) {
            const int64_t es = dtype_size(dst.dtype);
            std::memmove(static_cast<char*>(dst.data) + doff * es, static_cast<const char*>(src.data) + soff * es,
                         static_cast<size_t>(n * es));
            return;
        }
        for (int64_t i = 0; i < n; ++i) store(dst, doff + i, load(src, soff + i));
    }
    void axpy(Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n, float alpha) override {
        for (int64_t i = 0; i < n; ++i) store(dst, doff + i, load(dst, doff + i) + alpha * load(src, soff + i));
    }
    void scale(Tensor& t, int64_t off, int64_t n, float alpha) override {
        for (int64_t i = 0; i < n; ++i) store(t, off + i, alpha * load(t, off + i));
    }
    void fill(Tensor& t, int64_t off, int64_t n, float value) override {
        for (int64_t i = 0; i < n; ++i) store(t, off + i, value);
    }
    void fill_random(Tensor& t, uint64_t seed, float scale) override {
        std::mt19937_64 gen(seed);
        std::uniform_real_distribution<float> u(-scale, scale);
        for (int64_t i = 0; i < t.numel; ++i) store(t, i, u(gen));
    }
    void scale_columns(Tensor& y, const Tensor& x, const Tensor& w, int64_t rows, int64_t cols) override {
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) store(y, r * cols + c, load(x, r * cols + c) * load(w, c));
    }
    void silu(Tensor& y, const Tensor& x) override {
        for (int64_t i = 0; i < x.numel; ++i) {
            const float v = load(x, i);
            store(y, i, v / (1.0f + std::exp(-v)));
        }
    }
    void silu_backward(Tensor& dx, const Tensor& dy, const Tensor& x) override {
        for (int64_t i = 0; i < x.numel; ++i) {
            const float v = load(x, i), s = 1.0f / (1.0f + std::exp(-v));
            store(dx, i, load(dy, i) * s * (1.0f + v * (1.0f - s)));
        }
    }
    void mul(Tensor& out, const Tensor& a, const Tensor& b) override {
        for (int64_t i = 0; i < out.numel; ++i) store(out, i, load(a, i) * load(b, i));
    }
    void adam(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v, int64_t off, int64_t n,
              const AdamParams& p) override {
        float* w = static_cast<float*>(master.data) + off;
        const float* g = static_cast<const float*>(grad.data) + off;
        float* mm = static_cast<float*>(m.data) + off;
        float* vv = static_cast<float*>(v.data) + off;
        const float bc1 = 1.0f - std::pow(p.beta1, static_cast<float>(p.step));
        const float bc2 = 1.0f - std::pow(p.beta2, static_cast<float>(p.step));
        for (int64_t i = 0; i < n; ++i) {
            mm[i] = p.beta1 * mm[i] + (1.0f - p.beta1) * g[i];
            vv[i] = p.beta2 * vv[i] + (1.0f - p.beta2) * g[i] * g[i];
            const float upd = (mm[i] / bc1) / (std::sqrt(vv[i] / bc2) + p.eps) + p.weight_decay * w[i];
            w[i] -= p.lr * upd;
        }
    }

    void all_reduce(Tensor& t, int64_t off, int64_t n) override {
        if (world_ == 1 || n == 0) return;
        if (t.dtype == DType::f32) {
            check(MPI_Allreduce(MPI_IN_PLACE, static_cast<float*>(t.data) + off, static_cast<int>(n), MPI_FLOAT,
                                MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
            return;
        }
        // 16-bit: reduce in fp32 (like NCCL's internal accumulation), round once.
        std::vector<float> buf(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = load(t, off + i);
        check(MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce");
        for (int64_t i = 0; i < n; ++i) store(t, off + i, buf[static_cast<size_t>(i)]);
    }
    void all_gather(const Tensor& in, int64_t ioff, Tensor& out, int64_t ooff, int64_t n) override {
        const int es = dtype_size(in.dtype);
        if (in.data == out.data && ioff == ooff + rank_ * n) {
            check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, static_cast<char*>(out.data) + ooff * es,
                                static_cast<int>(n * es), MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
            return;
        }
        check(MPI_Allgather(static_cast<const char*>(in.data) + ioff * es, static_cast<int>(n * es), MPI_BYTE,
                            static_cast<char*>(out.data) + ooff * es, static_cast<int>(n * es), MPI_BYTE,
                            MPI_COMM_WORLD), "MPI_Allgather");
    }
    void reduce_scatter(const Tensor& in, int64_t ioff, Tensor& out, int64_t ooff, int64_t n) override {
        std::vector<float> src(static_cast<size_t>(n * world_)), dst(static_cast<size_t>(n));
        for (int64_t i = 0; i < n * world_; ++i) src[static_cast<size_t>(i)] = load(in, ioff + i);
        check(MPI_Reduce_scatter_block(src.data(), dst.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                                       MPI_COMM_WORLD), "MPI_Reduce_scatter_block");
        for (int64_t i = 0; i < n; ++i) store(out, ooff + i, dst[static_cast<size_t>(i)]);
    }
    void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

protected:
    void* raw_alloc(uint64_t bytes, Where) override {
        // Zeroed like a fresh tensor, and touched so the pages are resident
        // (the RSS high-water mark then sees them).
        void* p = std::malloc(static_cast<size_t>(bytes));
        if (p != nullptr) std::memset(p, 0, static_cast<size_t>(bytes));
        return p;
    }
    void raw_free(void* p, Where) override { std::free(p); }

private:
    static void check(int rc, const char* what) {
        if (rc != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed with MPI error " + std::to_string(rc));
    }
    std::vector<float> sa_, sb_;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace zeromem::runtime
