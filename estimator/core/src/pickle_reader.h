// A restricted unpickler: reads a Python pickle (protocols 2 to 5) made of
// plain values only (None, bools, ints, floats, str, bytes, lists, tuples,
// dicts) WITHOUT executing anything. Every opcode that would import or call
// code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX,
// PERSID, BINPERSID, EXT1/2/4) is refused, as is every other opcode outside
// the plain-type subset. Private to the estimator library (memory snapshots,
// run_log_snapshot.cpp).
//
// The opcodes are those of CPython's Lib/pickle.py (and pickletools.py):
// PROTO, FRAME, EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, MARK, SETITEM(S),
// APPEND(S), TUPLE, TUPLE1-3, SHORT_BINUNICODE, BINUNICODE, BINUNICODE8,
// SHORT_BINBYTES, BINBYTES, BININT, BININT1, BININT2, LONG1, BINFLOAT, NONE,
// NEWTRUE, NEWFALSE, MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET, STOP:
// what torch.cuda.memory._dump_snapshot (Python's pickle.dump, protocol 4 by
// default) and torch's C++ Pickler (torch/csrc/jit/serialization/pickler.cpp,
// protocol 2, tag_aggregates off for _memory_snapshot_pickled) write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zeromem::pickle {

enum class Kind : uint8_t { none, boolean, integer, floating, string, bytes, list, tuple, dict };
const char* to_string(Kind k);

/// One value. Containers share their items through the memo (BINGET of a
/// list already built gives the same node), so a Document is a graph of node
/// indices, never owned recursively: cycles cost nothing.
struct Node {
    Kind kind = Kind::none;
    uint16_t depth = 0;     ///< containers: nesting depth as built (a scalar is 0)
    uint32_t length = 0;    ///< strings and bytes: their length
    int64_t value = 0;      ///< integer, bool (0/1), double bits, string offset in the data, container index
    uint64_t offset = 0;    ///< byte offset of the opcode that made it
};

/// The limits that keep a hostile pickle from exhausting memory or time:
/// marks nested deeper than kMaxMarks and containers nested deeper than
/// kMaxDepth are refused; every length is checked against the bytes left, so
/// nothing is allocated beyond one node per opcode.
constexpr int kMaxMarks = 64;
constexpr int kMaxDepth = 64;

struct Document {
    std::string_view data;                     ///< the pickle (strings point into it)
    std::vector<Node> nodes;
    std::vector<std::vector<uint32_t>> items;  ///< per container: its items (dicts: key, value, key, value, ...)
    uint32_t root = 0;
    int protocol = 0;

    const Node& at(uint32_t i) const { return nodes[i]; }
    std::string_view text(uint32_t i) const;            ///< a string or bytes node's bytes
    const std::vector<uint32_t>& children(uint32_t i) const;  ///< a container's items
    /// The value under string key `key` of dict node `dict` (the last one,
    /// as Python keeps it), or -1 when absent.
    int64_t find(uint32_t dict, std::string_view key) const;
};

/// Reads the pickle `data` (named `path` in errors). Throws InputError
/// "<path>: byte <offset>: pickle: <what>" for a refused or unknown opcode
/// (naming it), a cut-off or malformed stream, a limit exceeded.
Document parse(std::string_view data, const std::string& path);

}  // namespace zeromem::pickle
