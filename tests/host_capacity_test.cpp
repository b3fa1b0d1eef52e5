// host_os_reserve and the activation allowance of a verdict without an
// architecture, each derived by hand from the formula its source gives.
#include "zeromem/estimate.h"
#include "zeromem/host_capacity.h"

#include <gtest/gtest.h>

namespace {

constexpr uint64_t kGiB = 1ull << 30;

// 1 TiB installed. memmap: sizeof(struct page) = 64 B per 4 KiB page
// (https://www.linux.com/news/minimizing-struct-page-overhead-2/) = 2^40 / 64
// = 16 GiB. MemTotal = 2^40 - 2^34 B = 1056964608 KiB; mm/page_alloc.c
// calculate_min_free_kbytes: int_sqrt(1056964608 x 16 = 16911433728) = 130043
// (130043^2 = 16911181849 <= 16911433728 < 130044^2 = 16911441936) KiB, inside
// [128, 262144]. OS baseline 1 GiB; DataLoader workers 0 (HF Trainer default
// dataloader_num_workers = 0).
TEST(HostCapacity, ReserveOfOneTebibyte) {
    const zeromem::HostReserve r = zeromem::host_os_reserve(1ull << 40);
    EXPECT_EQ(r.memmap, 16 * kGiB);
    EXPECT_EQ(r.min_watermark, 130043ull * 1024);
    EXPECT_EQ(r.os_baseline, kGiB);
    EXPECT_EQ(r.loader_workers, 0u);
    EXPECT_EQ(r.total(), 17 * kGiB + 130043ull * 1024);
}

// 16 TiB: int_sqrt((2^44 - 2^38) / 1024 x 16) = int_sqrt(2^38 - 2^32)
// ~ 522241 KiB > 262144: the kernel clamps min_free_kbytes to 262144 KiB.
TEST(HostCapacity, MinWatermarkIsClampedAt256MiB) {
    const zeromem::HostReserve r = zeromem::host_os_reserve(1ull << 44);
    EXPECT_EQ(r.memmap, 256 * kGiB);
    EXPECT_EQ(r.min_watermark, 262144ull * 1024);
}

// 7e9 parameters: L = round(cbrt(7e9 / (12 x 128^2) = 35603.6)) = round(32.89)
// = 33; h = round(sqrt(7e9 / (12 x 33) = 17676767.7)) = round(4204.37) = 4204;
// heads = round(4204 / 128 = 32.84) = 33 (GPT-3 shapes, Brown et al. 2020
// Table 2.1; 12 h^2 per layer, Korthikanti et al. 2022 Sec. 2).
TEST(ActivationAllowance, DenseShapeOfSevenBillion) {
    const zeromem::DenseShape d = zeromem::dense_decoder_shape(7000000000ull);
    EXPECT_EQ(d.layers, 33);
    EXPECT_EQ(d.hidden, 4204);
    EXPECT_EQ(d.heads, 33);
}

// Korthikanti et al. 2022 Table 2, no recompute, 16-bit, t = 1: sbh(34 +
// 5as/h) per layer; flash attention keeps no s^2 scores, so 34 sbh. s = 2048,
// b = 1, h = 4204: sbh = 8609792; 34 sbh = 292732928 B per layer, x 33 layers
// = 9660186624, + 5 sbh = 43048960 (embedding output and final norm) =
// 9703235584 B. Full checkpointing: 2 sbh = 17219584 per layer x 33 =
// 568246272, + one recomputed layer 292732928, + 5 sbh = 904028160 B.
TEST(ActivationAllowance, KorthikantiBytesForSevenBillion) {
    zeromem::EstimateInput in;
    in.model.params = 7000000000ull;
    in.train.seq_len = 2048;
    in.train.micro_batch = 1;
    std::string how;
    EXPECT_EQ(zeromem::dense_decoder_allowance(in, how), 9703235584ull);
    EXPECT_NE(how.find("L = 33, h = 4204"), std::string::npos) << how;
    in.train.checkpointing = zeromem::Checkpointing::full;
    EXPECT_EQ(zeromem::dense_decoder_allowance(in, how), 904028160ull);
}

}  // namespace
