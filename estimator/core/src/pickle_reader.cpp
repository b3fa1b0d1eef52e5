// The restricted unpickler (see pickle_reader.h). Opcode values and
// semantics: CPython Lib/pickle.py (_Unpickler.load_*) and pickletools.py.
#include "pickle_reader.h"

#include "zeromem/types.h"

#include <cstdio>
#include <unordered_map>

namespace zeromem::pickle {

const char* to_string(Kind k) {
    switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "a bool";
    case Kind::integer: return "an int";
    case Kind::floating: return "a float";
    case Kind::string: return "a str";
    case Kind::bytes: return "bytes";
    case Kind::list: return "a list";
    case Kind::tuple: return "a tuple";
    case Kind::dict: return "a dict";
    }
    return "?";
}

std::string_view Document::text(uint32_t i) const {
    const Node& n = nodes[i];
    return data.substr(static_cast<std::size_t>(n.value), n.length);
}

const std::vector<uint32_t>& Document::children(uint32_t i) const {
    return items[static_cast<std::size_t>(nodes[i].value)];
}

int64_t Document::find(uint32_t dict, std::string_view key) const {
    const auto& kv = children(dict);
    int64_t found = -1;
    for (std::size_t k = 0; k + 1 < kv.size(); k += 2)
        if (nodes[kv[k]].kind == Kind::string && text(kv[k]) == key) found = kv[k + 1];
    return found;
}

namespace {

// Every opcode of protocols 0-5 by name, for the errors (pickletools.py).
const char* opcode_name(unsigned char op) {
    switch (op) {
    case '(': return "MARK";            case '.': return "STOP";          case '0': return "POP";
    case '1': return "POP_MARK";        case '2': return "DUP";           case 'F': return "FLOAT";
    case 'I': return "INT";             case 'J': return "BININT";        case 'K': return "BININT1";
    case 'L': return "LONG";            case 'M': return "BININT2";       case 'N': return "NONE";
    case 'P': return "PERSID";          case 'Q': return "BINPERSID";     case 'R': return "REDUCE";
    case 'S': return "STRING";          case 'T': return "BINSTRING";     case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";         case 'X': return "BINUNICODE";    case 'a': return "APPEND";
    case 'b': return "BUILD";           case 'c': return "GLOBAL";        case 'd': return "DICT";
    case '}': return "EMPTY_DICT";      case 'e': return "APPENDS";       case 'g': return "GET";
    case 'h': return "BINGET";          case 'i': return "INST";          case 'j': return "LONG_BINGET";
    case 'l': return "LIST";            case ']': return "EMPTY_LIST";    case 'o': return "OBJ";
    case 'p': return "PUT";             case 'q': return "BINPUT";        case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";         case 't': return "TUPLE";         case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";        case 'G': return "BINFLOAT";      case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";  case 0x80: return "PROTO";        case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";           case 0x83: return "EXT2";         case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";         case 0x86: return "TUPLE2";       case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";        case 0x89: return "NEWFALSE";     case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";          case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";      case 0x8f: return "EMPTY_SET";    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";      case 0x92: return "NEWOBJ_EX";    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";        case 0x95: return "FRAME";        case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
    }
}

// The opcodes that import a name or call one: never run.
bool executes(unsigned char op) {
    switch (op) {
    case 'c': case 0x93: case 'R': case 'b': case 'i': case 'o': case 0x81: case 0x92:
    case 'P': case 'Q': case 0x82: case 0x83: case 0x84:
        return true;
    default:
        return false;
    }
}

// UTF-8 as Python's decoder reads a pickled str ('surrogatepass': encoded
// surrogates are accepted, everything else must be well formed).
bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int more = 0;
        uint32_t cp = 0;
        if (c < 0x80) { ++i; continue; }
        if (c >= 0xc2 && c <= 0xdf) { more = 1; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { more = 2; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { more = 3; cp = c & 0x07; }
        else return false;
        if (s.size() - i <= static_cast<std::size_t>(more)) return false;
        for (int k = 1; k <= more; ++k) {
            const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
            if ((d & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (d & 0x3f);
        }
        if ((more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;
        i += static_cast<std::size_t>(more) + 1;
    }
    return true;
}

class Reader {
public:
    Reader(std::string_view data, const std::string& path) : path_(path) { doc_.data = data; }

    Document run() {
        while (true) {
            if (pos_ >= doc_.data.size()) fail(pos_, "cut off: the stream ends without a STOP opcode");
            op_at_ = pos_;
            const auto op = static_cast<unsigned char>(doc_.data[pos_++]);
            if (step(op)) break;
        }
        if (stack_.size() != 1 || !marks_.empty())
            fail(op_at_, "STOP with " + std::to_string(stack_.size()) + " values and " + std::to_string(marks_.size()) +
                             " open MARKs on the stack (one value expected)");
        doc_.root = stack_.back();
        return std::move(doc_);
    }

private:
    Document doc_;
    const std::string& path_;
    std::size_t pos_ = 0, op_at_ = 0;
    std::vector<uint32_t> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<uint32_t, uint32_t> memo_;

    [[noreturn]] void fail(std::size_t at, const std::string& what) const {
        throw InputError(path_ + ": byte " + std::to_string(at) + ": pickle: " + what);
    }
    std::string op_name() const {
        const auto op = static_cast<unsigned char>(doc_.data[op_at_]);
        const char* n = opcode_name(op);
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return n ? std::string(n) + " (" + hex + ")" : std::string("unknown opcode ") + hex;
    }

    // `n` bytes at the read position, little-endian, as an unsigned number.
    uint64_t take(std::size_t n) {
        if (doc_.data.size() - pos_ < n)
            fail(op_at_, "cut off inside " + op_name() + " (" + std::to_string(n) + " bytes needed, " +
                             std::to_string(doc_.data.size() - pos_) + " left)");
        uint64_t v = 0;
        for (std::size_t k = 0; k < n; ++k) v |= uint64_t(static_cast<unsigned char>(doc_.data[pos_ + k])) << (8 * k);
        pos_ += n;
        return v;
    }

    uint32_t node(Kind kind, int64_t value, uint32_t length = 0) {
        doc_.nodes.push_back({kind, 0, length, value, op_at_});
        return static_cast<uint32_t>(doc_.nodes.size() - 1);
    }
    uint32_t container(Kind kind) {
        doc_.items.emplace_back();
        const uint32_t n = node(kind, static_cast<int64_t>(doc_.items.size() - 1));
        doc_.nodes[n].depth = 1;
        return n;
    }
    void push(uint32_t n) { stack_.push_back(n); }
    uint32_t pop() {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail(op_at_, op_name() + " on an empty stack");
        const uint32_t n = stack_.back();
        stack_.pop_back();
        return n;
    }
    // The values since the last MARK, which is removed.
    std::vector<uint32_t> pop_mark() {
        if (marks_.empty()) fail(op_at_, op_name() + " without a MARK");
        const std::size_t m = marks_.back();
        marks_.pop_back();
        std::vector<uint32_t> v(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
        stack_.resize(m);
        return v;
    }
    uint32_t top() const {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail(op_at_, op_name() + " on an empty stack");
        return stack_.back();
    }
    // Adds `items` to container `c` (of kind `kind`), keeping the depth bound.
    void add(uint32_t c, Kind kind, const std::vector<uint32_t>& items) {
        if (doc_.nodes[c].kind != kind)
            fail(op_at_, op_name() + " on " + to_string(doc_.nodes[c].kind) + ", not " + to_string(kind));
        if (kind == Kind::dict && items.size() % 2 != 0) fail(op_at_, op_name() + " with a key and no value");
        auto& dst = doc_.items[static_cast<std::size_t>(doc_.nodes[c].value)];
        for (uint32_t i : items) {
            const int d = doc_.nodes[i].depth + 1;
            if (d > kMaxDepth) fail(op_at_, "containers nested deeper than " + std::to_string(kMaxDepth));
            if (d > doc_.nodes[c].depth) doc_.nodes[c].depth = static_cast<uint16_t>(d);
            dst.push_back(i);
        }
    }
    uint32_t tuple(std::vector<uint32_t> items) {
        const uint32_t t = container(Kind::tuple);
        add(t, Kind::tuple, items);
        return t;
    }
    void text(Kind kind, uint64_t length) {
        if (doc_.data.size() - pos_ < length)
            fail(op_at_, "cut off inside " + op_name() + ": a length of " + std::to_string(length) + " bytes, " +
                             std::to_string(doc_.data.size() - pos_) + " left");
        const std::string_view s = doc_.data.substr(pos_, static_cast<std::size_t>(length));
        if (kind == Kind::string && !valid_utf8(s)) fail(op_at_, op_name() + ": the string is not UTF-8");
        push(node(kind, static_cast<int64_t>(pos_), static_cast<uint32_t>(length)));
        pos_ += static_cast<std::size_t>(length);
    }
    void memo_get(uint64_t key) {
        const auto it = memo_.find(static_cast<uint32_t>(key));
        if (it == memo_.end()) fail(op_at_, op_name() + " of memo " + std::to_string(key) + ", which was never stored");
        push(it->second);
    }
    void memo_put(uint64_t key) { memo_[static_cast<uint32_t>(key)] = top(); }
    // LONG1: little-endian two's complement of `n` bytes, within int64.
    void long1(std::size_t n) {
        if (doc_.data.size() - pos_ < n) take(n);  // the cut-off error
        int64_t v = 0;
        for (std::size_t k = 0; k < n; ++k) {
            const auto b = static_cast<unsigned char>(doc_.data[pos_ + k]);
            if (k >= 8) {
                const unsigned char sign = v < 0 ? 0xff : 0x00;
                if (b != sign) fail(op_at_, "LONG1: an integer beyond 64 bits");
                continue;
            }
            v = static_cast<int64_t>(static_cast<uint64_t>(v) | (uint64_t(b) << (8 * k)));
        }
        if (n > 0 && n < 8 && (static_cast<unsigned char>(doc_.data[pos_ + n - 1]) & 0x80))
            v = static_cast<int64_t>(static_cast<uint64_t>(v) | (~uint64_t(0) << (8 * n)));  // sign-extend
        pos_ += n;
        push(node(Kind::integer, v));
    }

    // One opcode; true at STOP.
    bool step(unsigned char op) {
        switch (op) {
        case 0x80: {  // PROTO
            const auto v = static_cast<int>(take(1));
            if (v < 2 || v > 5) fail(op_at_, "protocol " + std::to_string(v) + ": zeromem reads protocols 2 to 5");
            doc_.protocol = v;
            return false;
        }
        case 0x95: {  // FRAME: the frame's length; frames only group the opcodes
            const uint64_t n = take(8);
            if (n > doc_.data.size() - pos_) fail(op_at_, "FRAME of " + std::to_string(n) + " bytes, " +
                                                              std::to_string(doc_.data.size() - pos_) + " left (cut off)");
            return false;
        }
        case '.': return true;  // STOP
        case '(':               // MARK
            if (marks_.size() >= static_cast<std::size_t>(kMaxMarks)) fail(op_at_, "MARKs nested deeper than " + std::to_string(kMaxMarks));
            marks_.push_back(stack_.size());
            return false;
        case '}': push(container(Kind::dict)); return false;
        case ']': push(container(Kind::list)); return false;
        case ')': push(container(Kind::tuple)); return false;
        case 'N': push(node(Kind::none, 0)); return false;
        case 0x88: push(node(Kind::boolean, 1)); return false;
        case 0x89: push(node(Kind::boolean, 0)); return false;
        case 'K': push(node(Kind::integer, static_cast<int64_t>(take(1)))); return false;
        case 'M': push(node(Kind::integer, static_cast<int64_t>(take(2)))); return false;
        case 'J': push(node(Kind::integer, static_cast<int32_t>(static_cast<uint32_t>(take(4))))); return false;
        case 0x8a: long1(static_cast<std::size_t>(take(1))); return false;
        case 'G': {  // BINFLOAT: big-endian IEEE 754 double
            uint64_t be = take(8), bits = 0;
            for (int k = 0; k < 8; ++k) bits = (bits << 8) | ((be >> (8 * k)) & 0xff);
            push(node(Kind::floating, static_cast<int64_t>(bits)));
            return false;
        }
        case 0x8c: text(Kind::string, take(1)); return false;
        case 'X': text(Kind::string, take(4)); return false;
        case 0x8d: text(Kind::string, take(8)); return false;
        case 'C': text(Kind::bytes, take(1)); return false;
        case 'B': text(Kind::bytes, take(4)); return false;
        case 0x94: memo_put(memo_.size()); return false;  // MEMOIZE
        case 'q': memo_put(take(1)); return false;
        case 'r': memo_put(take(4)); return false;
        case 'h': memo_get(take(1)); return false;
        case 'j': memo_get(take(4)); return false;
        case 0x85: { const uint32_t a = pop(); push(tuple({a})); return false; }
        case 0x86: { const uint32_t b = pop(), a = pop(); push(tuple({a, b})); return false; }
        case 0x87: { const uint32_t c = pop(), b = pop(), a = pop(); push(tuple({a, b, c})); return false; }
        case 't': push(tuple(pop_mark())); return false;
        case 'a': { const uint32_t v = pop(); add(top(), Kind::list, {v}); return false; }
        case 'e': { const auto v = pop_mark(); add(top(), Kind::list, v); return false; }
        case 's': { const uint32_t v = pop(), k = pop(); add(top(), Kind::dict, {k, v}); return false; }
        case 'u': { const auto v = pop_mark(); add(top(), Kind::dict, v); return false; }
        default: break;
        }
        if (executes(op)) fail(op_at_, op_name() + " refused: it would import or call code, and a memory snapshot holds plain values only");
        fail(op_at_, op_name() + " refused: not one of the plain-value opcodes zeromem reads");
    }
};

}  // namespace

Document parse(std::string_view data, const std::string& path) { return Reader(data, path).run(); }

}  // namespace zeromem::pickle
