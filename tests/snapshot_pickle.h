// A small pickle writer for the memory-snapshot tests, emitting what torch's
// C++ Pickler emits (torch/csrc/jit/serialization/pickler.cpp, protocol 2,
// the tag_aggregates=false of torch/csrc/cuda/memory_snapshot.cpp
// _memory_snapshot_pickled): PROTO 2; strings as BINUNICODE followed by
// BINPUT (pushString memoizes every string; a repeat is a BINGET); ints as
// BININT1 / BININT2 / BININT, else LONG1 of 8 bytes (pushInt); dicts as
// EMPTY_DICT MARK ... SETITEMS and lists as EMPTY_LIST MARK ... APPENDS, even
// empty (pushDict, pushGenericList); a container shared by several parents
// BINPUT after its first push and BINGET after (pushIValue, memoized by
// pointer); doubles as big-endian BINFLOAT; (a, b) as TUPLE2.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace zeromem::testing {

class TorchPickler {
public:
    std::string out;

    void op(unsigned char c) { out.push_back(static_cast<char>(c)); }
    void le(uint64_t v, int n) {
        for (int k = 0; k < n; ++k) out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
    }
    void protocol() { op(0x80); op(2); }
    void stop() { op('.'); }
    void put() {  // pushNextBinPut
        if (memo_ <= 255) { op('q'); le(memo_, 1); }
        else { op('r'); le(memo_, 4); }
        ++memo_;
    }
    void get(uint32_t id) {  // pushBinGet
        if (id <= 255) { op('h'); le(id, 1); }
        else { op('j'); le(id, 4); }
    }
    void str(const std::string& s) {  // pushString
        const auto it = strings_.find(s);
        if (it != strings_.end()) return get(it->second);
        op('X');
        le(s.size(), 4);
        out += s;
        strings_[s] = memo_;
        put();
    }
    void integer(int64_t n) {  // pushInt
        if (n >= 0 && n <= 255) { op('K'); le(uint64_t(n), 1); }
        else if (n >= 0 && n <= 65535) { op('M'); le(uint64_t(n), 2); }
        else if (n >= INT32_MIN && n <= INT32_MAX) { op('J'); le(uint64_t(uint32_t(int32_t(n))), 4); }
        else { op(0x8a); le(8, 1); le(uint64_t(n), 8); }
    }
    void boolean(bool b) { op(b ? 0x88 : 0x89); }
    void floating(double d) {
        uint64_t bits;
        static_assert(sizeof bits == sizeof d);
        __builtin_memcpy(&bits, &d, sizeof d);
        op('G');
        for (int k = 7; k >= 0; --k) out.push_back(static_cast<char>((bits >> (8 * k)) & 0xff));
    }
    void begin_dict() { op('}'); op('('); }
    void end_dict() { op('u'); }
    void begin_list() { op(']'); op('('); }
    void end_list() { op('e'); }
    /// Ends a container that other parents share: its memo id for get().
    uint32_t end_shared_list() { end_list(); const uint32_t id = memo_; put(); return id; }
    void tuple2(int64_t a, int64_t b) { integer(a); integer(b); op(0x86); }

private:
    uint32_t memo_ = 0;
    std::map<std::string, uint32_t> strings_;
};

}  // namespace zeromem::testing
