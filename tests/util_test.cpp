#include "zeromem/types.h"
#include "zeromem/util.h"

#include <gtest/gtest.h>

using namespace zeromem;

TEST(ParseBytes, DecimalAndBinaryUnits) {
    EXPECT_EQ(parse_bytes("80GB", "--gpu-memory"), 80000000000ull);
    EXPECT_EQ(parse_bytes("80GiB", "--gpu-memory"), 80ull * 1024 * 1024 * 1024);
    EXPECT_EQ(parse_bytes("1TB", "--host-memory"), 1000000000000ull);
    EXPECT_EQ(parse_bytes("1.5TiB", "--host-memory"), 1649267441664ull);  // 1.5 * 2^40
    EXPECT_EQ(parse_bytes("512 MiB", "x"), 512ull * 1048576);
    EXPECT_EQ(parse_bytes("12345B", "x"), 12345ull);
    EXPECT_EQ(parse_bytes_or_zero("0", "--cuda-context"), 0ull);
}

TEST(ParseBytes, RejectsBadInput) {
    EXPECT_THROW(parse_bytes("-1GB", "--gpu-memory"), InputError);
    EXPECT_THROW(parse_bytes("0GB", "--gpu-memory"), InputError);
    EXPECT_THROW(parse_bytes("80G", "--gpu-memory"), InputError);
    EXPECT_THROW(parse_bytes("80", "--gpu-memory"), InputError);  // no unit: bytes or GB? rejected
    EXPECT_THROW(parse_bytes("eighty", "--gpu-memory"), InputError);
    try {
        parse_bytes("80XB", "--gpu-memory");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--gpu-memory"), std::string::npos);
    }
}

TEST(ParseCount, Suffixes) {
    EXPECT_EQ(parse_count("7e9", "--params"), 7000000000ull);
    EXPECT_EQ(parse_count("7B", "--params"), 7000000000ull);
    EXPECT_EQ(parse_count("1.3b", "--params"), 1300000000ull);
    EXPECT_EQ(parse_count("7000000000", "--params"), 7000000000ull);
    EXPECT_EQ(parse_count("350M", "--params"), 350000000ull);
    EXPECT_THROW(parse_count("-7B", "--params"), InputError);
    EXPECT_THROW(parse_count("0", "--params"), InputError);
    EXPECT_THROW(parse_count("7Q", "--params"), InputError);
}

TEST(ClosestNames, SuggestsNearMisses) {
    const std::vector<std::string> c{"llama-2-7b", "llama-2-13b", "mistral-7b", "gpt2-xl"};
    auto s = closest_names("llama2-7b", c);
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.front(), "llama-2-7b");
    EXPECT_TRUE(closest_names("zzzzzzzzzz", c).empty());
}

TEST(ParseInt, WholeNumbersOnly) {
    EXPECT_EQ(parse_int("8", "--gpus"), 8);
    EXPECT_EQ(parse_int(" 16 ", "--gpus"), 16);
    EXPECT_EQ(parse_int("-3", "--stage"), -3);
    EXPECT_THROW(parse_int("2.5", "--micro-batch"), InputError);
    EXPECT_THROW(parse_int("eight", "--gpus"), InputError);
    EXPECT_THROW(parse_int("99999999999999999999", "--gpus"), InputError);
    // Scientific notation of a whole number is that number (as --params takes 7e9); a fraction in it is not.
    EXPECT_EQ(parse_int("1e3", "--micro-batch"), 1000);
    EXPECT_EQ(parse_int("1e15", "--gpus"), 1000000000000000);
    EXPECT_THROW(parse_int("2.5e0", "--micro-batch"), InputError);
    EXPECT_THROW(parse_int("1e19", "--gpus"), InputError);  // past 2^62
    EXPECT_THROW(parse_int("0x10", "--gpus"), InputError);
    EXPECT_THROW(parse_int("nan", "--gpus"), InputError);
    try {
        parse_int("2.5", "--micro-batch");
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--micro-batch: must be a whole number"), std::string::npos);
    }
}

// GiB is 2^30 bytes; three decimals and the unit, as the simulator's and the
// process terms' explanations print it: 1.5 x 2^30 = 1610612736 B, and
// 10^9 B / 2^30 = 0.93132... GiB.
TEST(GibText, BinaryGibWithThreeDecimalsAndUnit) {
    EXPECT_EQ(zeromem::gib_text(1610612736ull), "1.500 GiB");
    EXPECT_EQ(zeromem::gib_text(1000000000ull), "0.931 GiB");
    EXPECT_EQ(zeromem::gib_text(0), "0.000 GiB");
}

// Every input error is one line: a control byte from a file name or a file's text (a newline, a NUL that
// c_str() would cut the message at) is written as \xNN; a tab stays.
TEST(InputErrorText, ControlBytesAreEscaped) {
    EXPECT_STREQ(InputError(std::string("a\nb\0c\td\x7f", 8)).what(), "a\\x0ab\\x00c\td\\x7f");
    EXPECT_STREQ(InputError("plain: text").what(), "plain: text");
}
