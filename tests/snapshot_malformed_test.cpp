// Hostile and broken memory snapshots: nothing is executed, every opcode that
// would import or call code is refused by name and byte offset, lengths and
// nesting are bounded, a cut-off or inconsistent file is one line naming the
// file and the byte. Opcodes: CPython Lib/pickle.py.
#include "snapshot_pickle.h"

#include "zeromem/run_log.h"
#include "zeromem/types.h"

#include "input_error.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

std::string error_reading(const std::string& bytes) {
    const std::string e = error_of([&] { read_run_log(bytes, "evil.pickle"); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_TRUE(contains(e, "evil.pickle: ")) << e;
    return e;
}

// PROTO 2 and `body`: a literal (NUL bytes included) or a string.
std::string p2(const std::string& body) { return std::string("\x80\x02", 2) + body; }
template <std::size_t N>
std::string p2(const char (&body)[N]) { return p2(std::string(body, N - 1)); }

TEST(MemorySnapshotRefuses, EveryOpcodeThatImportsOrCalls) {
    // os.system("true") as protocol 0-4 pickles spell it: never imported.
    EXPECT_TRUE(contains(error_reading(p2("cos\nsystem\nX\x04\x00\x00\x00true\x85R.")),
                         "evil.pickle: byte 2: pickle: GLOBAL (0x63) refused: it would import or call code"));
    EXPECT_TRUE(contains(error_reading(std::string("\x80\x04\x8c\x02os\x8c\x06system\x93", 15) + "."),
                         "byte 14: pickle: STACK_GLOBAL (0x93) refused"));
    const std::pair<std::string, const char*> calls[] = {
        {"]R", "byte 3: pickle: REDUCE (0x52)"},   {"]}b", "byte 4: pickle: BUILD (0x62)"},
        {"(i", "byte 3: pickle: INST (0x69)"},     {"(o", "byte 3: pickle: OBJ (0x6f)"},
        {"])\x81", "byte 4: pickle: NEWOBJ (0x81)"}, {"]\x92", "byte 3: pickle: NEWOBJ_EX (0x92)"},
        {"Q", "byte 2: pickle: BINPERSID (0x51)"}, {"\x82\x01", "byte 2: pickle: EXT1 (0x82)"}};
    for (const auto& [body, what] : calls) {
        const std::string e = error_reading(p2(body));
        EXPECT_TRUE(contains(e, what)) << e;
        EXPECT_TRUE(contains(e, "it would import or call code")) << e;
    }
    // Plain opcodes outside the subset are refused too (sets, text ints, POP).
    EXPECT_TRUE(contains(error_reading(p2("\x8f.")), "byte 2: pickle: EMPTY_SET (0x8f) refused: not one of the plain-value opcodes"));
    EXPECT_TRUE(contains(error_reading(p2("I1\n.")), "byte 2: pickle: INT (0x49) refused"));
    EXPECT_TRUE(contains(error_reading(p2("\xff")), "byte 2: pickle: unknown opcode 0xff refused"));
}

TEST(MemorySnapshotRefuses, HugeLengthsWithoutAllocating) {
    EXPECT_TRUE(contains(error_reading(p2("X\xff\xff\xff\xff" "abc")),
                         "byte 2: pickle: cut off inside BINUNICODE (0x58): a length of 4294967295 bytes, 3 left"));
    EXPECT_TRUE(contains(error_reading(std::string("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", 11)),
                         "a length of 9223372036854775807 bytes, 0 left"));
    EXPECT_TRUE(contains(error_reading(std::string("\x80\x04\x95\x00\x00\x00\x00\x00\x00\x10\x00}.", 13)),
                         "byte 2: pickle: FRAME of 4503599627370496 bytes, 2 left (cut off)"));
    EXPECT_TRUE(contains(error_reading(p2("B\x10\x00\x00\x00xx")), "cut off inside BINBYTES (0x42)"));
    EXPECT_TRUE(contains(error_reading(p2(std::string("\x8a\x10", 2) + std::string(16, '\x01') + ".")),
                         "byte 2: pickle: LONG1: an integer beyond 64 bits"));
}

TEST(MemorySnapshotRefuses, DeepNestingIsBounded) {
    EXPECT_TRUE(contains(error_reading(p2(std::string(65, '('))), "byte 66: pickle: MARKs nested deeper than 64"));
    // 100 lists each appended into the previous one: depth 65 is refused.
    std::string body;
    for (int k = 0; k < 100; ++k) body += "]";
    for (int k = 0; k < 99; ++k) body += "a";
    EXPECT_TRUE(contains(error_reading(p2(body + ".")), "pickle: containers nested deeper than 64"));
    // A list appended to itself through the memo does not loop: it deepens by one each time.
    std::string self("]q\x00", 3);
    for (int k = 0; k < 80; ++k) self += std::string("h\x00" "a", 3);
    EXPECT_TRUE(contains(error_reading(p2(self + ".")), "containers nested deeper than 64"));
}

TEST(MemorySnapshotRefuses, BrokenStreams) {
    EXPECT_TRUE(contains(error_reading(p2("}")), "byte 3: pickle: cut off: the stream ends without a STOP opcode"));
    EXPECT_TRUE(contains(error_reading(p2("K")), "byte 2: pickle: cut off inside BININT1 (0x4b) (1 bytes needed, 0 left)"));
    EXPECT_TRUE(contains(error_reading(p2("h\x07.")), "byte 2: pickle: BINGET (0x68) of memo 7, which was never stored"));
    EXPECT_TRUE(contains(error_reading(p2("a.")), "byte 2: pickle: APPEND (0x61) on an empty stack"));
    EXPECT_TRUE(contains(error_reading(p2("K\x01K\x02s.")), "byte 6: pickle: SETITEM (0x73) on an empty stack"));
    EXPECT_TRUE(contains(error_reading(p2("}K\x01" "a.")), "byte 5: pickle: APPEND (0x61) on a dict, not a list"));
    EXPECT_TRUE(contains(error_reading(p2("}(K\x01u.")), "byte 6: pickle: SETITEMS (0x75) with a key and no value"));
    EXPECT_TRUE(contains(error_reading(p2("e.")), "byte 2: pickle: APPENDS (0x65) without a MARK"));
    EXPECT_TRUE(contains(error_reading(p2("}}.")), "byte 4: pickle: STOP with 2 values and 0 open MARKs"));
    EXPECT_TRUE(contains(error_reading(p2("X\x02\x00\x00\x00\xc3\x28.")), "byte 2: pickle: BINUNICODE (0x58): the string is not UTF-8"));
    EXPECT_TRUE(contains(error_reading(p2("].")), "memory snapshot: the snapshot is a list, not a dict"));
}

// Every prefix of a real snapshot (CPython protocol 4, tests/data/snapshots)
// is one error line naming the file and a byte, never a crash or a reading.
TEST(MemorySnapshotRefuses, EveryCutOfARealFileIsAnError) {
    std::ifstream in(std::string(ZEROMEM_TEST_DATA_DIR) + "/snapshots/python_p4.pickle", std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string full = ss.str();
    ASSERT_GT(full.size(), 65536u);
    for (std::size_t cut = 1; cut < full.size(); cut += cut < 4096 ? 97 : 4093) {
        const std::string e = error_reading(full.substr(0, cut));
        EXPECT_TRUE(contains(e, "evil.pickle: byte ")) << cut << ": " << e;
    }
    // The last FRAME holds the STOP: cut one byte short, the frame is cut off.
    EXPECT_TRUE(contains(error_reading(full.substr(0, full.size() - 1)), "left (cut off)"));
}

// A parseable pickle that is not a snapshot, or an inconsistent one: the field and its byte.
TEST(MemorySnapshotRefuses, SchemaErrorsNameTheField) {
    auto snapshot = [](const std::string& state, int64_t size, int64_t allocated_size) {
        zeromem::testing::TorchPickler p;
        p.protocol();
        p.begin_dict();
        p.str("segments");
        p.begin_list();
        p.begin_dict();
        p.str("device"); p.integer(0);
        p.str("total_size"); p.integer(4096);
        p.str("allocated_size"); p.integer(allocated_size);
        p.str("blocks");
        p.begin_list();
        p.begin_dict(); p.str("size"); p.integer(size); p.str("state"); p.str(state); p.end_dict();
        p.end_list();
        p.end_dict();
        p.end_list();
        p.end_dict();
        p.stop();
        return p.out;
    };
    EXPECT_NO_THROW(read_run_log(snapshot("active_allocated", 4096, 4096), "ok.pickle"));
    EXPECT_TRUE(contains(error_reading(snapshot("freed", 4096, 4096)),
                         "memory snapshot: segments[0].blocks[0].state is 'freed', not active_allocated"));
    // A string of the file in an error is escaped: the error stays one line (found by fuzz_snapshot).
    EXPECT_TRUE(contains(error_reading(snapshot("in\nctive", 4096, 4096)), "state is 'in\\x0active', not"));
    EXPECT_TRUE(contains(error_reading(snapshot(std::string(200, 'z'), 4096, 4096)), "state is '" + std::string(80, 'z') + "...', not"));
    EXPECT_TRUE(contains(error_reading(snapshot("active_allocated", -1, 4096)),
                         "memory snapshot: segments[0].blocks[0].size is -1, outside 0..4611686018427387904"));
    EXPECT_TRUE(contains(error_reading(snapshot("active_allocated", 4096, 2048)),
                         "memory snapshot: segments[0].allocated_size is 2048, but its active_allocated blocks hold 4096 bytes"));
    EXPECT_TRUE(contains(error_reading(p2("}.")), "evil.pickle: byte 2: memory snapshot: the snapshot has no 'segments'"));
    EXPECT_TRUE(contains(error_reading(p2("}X\x08\x00\x00\x00segments]s.")), "evil.pickle: memory snapshot: no segments and no trace"));
}

// A list referenced many times through the memo costs a few bytes per reference: a segment list that names
// one blocks list 2,000 times, each of 2,000 blocks, would be read as 4 million blocks from about 60 KB (a
// tester's 12 KB pickle expanded to 3 GB). torch writes each block and trace entry as a dict of its own,
// so the reader stops once it has read more of them than the pickle holds values; frames lists, which
// torch does share (memory_snapshot.cpp), are not counted.
TEST(MemorySnapshotRefuses, SharedListsCannotMultiplyTheWork) {
    zeromem::testing::TorchPickler p;
    p.protocol();
    p.begin_dict();
    p.str("segments");
    p.begin_list();
    uint32_t blocks = 0;
    for (int s = 0; s < 2000; ++s) {
        p.begin_dict();
        p.str("device"); p.integer(0);
        p.str("total_size"); p.integer(int64_t(2000) * 512);
        p.str("blocks");
        if (s == 0) {
            p.begin_list();
            for (int b = 0; b < 2000; ++b) {
                p.begin_dict(); p.str("size"); p.integer(512); p.str("state"); p.str("active_allocated"); p.end_dict();
            }
            blocks = p.end_shared_list();
        } else {
            p.get(blocks);
        }
        p.end_dict();
    }
    p.end_list();
    p.end_dict();
    p.stop();
    ASSERT_LT(p.out.size(), std::size_t(64) << 10);
    const std::string e = error_reading(p.out);
    EXPECT_TRUE(contains(e, "memory snapshot: segments[")) << e;
    EXPECT_TRUE(contains(e, "a list is referenced more than once through the pickle memo")) << e;

    // device_traces holds one list per device: no more than the device index allows (0 .. 65536).
    zeromem::testing::TorchPickler t;
    t.protocol();
    t.begin_dict();
    t.str("segments");
    t.begin_list();
    t.end_list();
    t.str("device_traces");
    t.begin_list();
    for (int d = 0; d < 65538; ++d) {
        t.begin_list();
        t.end_list();
    }
    t.end_list();
    t.end_dict();
    t.stop();
    EXPECT_TRUE(contains(error_reading(t.out), "memory snapshot: device_traces has 65538 lists, one per device: more than 65537 devices"));
}

}  // namespace
