// Reading the module tree JSON of python/zeromem (format version 1,
// python/README.md). Every field is checked; a refusal is one line
// "FILE:LINE: /json/pointer: what is wrong", the line found by the key
// scanner of ds_config_lines.cpp (only when refusing: a tree of a large MoE
// model has tens of thousands of modules).
#include "zeromem/module_tree.h"

#include "hf_config_reader.h"  // type_name, show
#include "zeromem/ds_config.h"
#include "zeromem/types.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace zeromem {

namespace {

using json = nlohmann::json;
using model_detail::show;
using model_detail::type_name;

constexpr const char* kFormat = "zeromem-module-tree";
// No tensor dimension comes near 2^40 nor any model near 2^50 (10^15)
// parameters; the bounds keep every product and sum far from overflow.
constexpr uint64_t kMaxDim = uint64_t(1) << 40;
constexpr uint64_t kMaxParams = uint64_t(1) << 50;
constexpr int kMaxDepth = 64;
constexpr std::uintmax_t kMaxBytes = std::uintmax_t(256) << 20;

// RFC 6901 escaping of one key (nlohmann::json_pointer escapes ~ and /).
std::string escaped(const std::string& key) { return (nlohmann::json::json_pointer() / key).to_string().substr(1); }

class TreeReader {
public:
    TreeReader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

    ModuleTree read() {
        const json doc = parse();
        if (!doc.is_object()) fail("", "a module tree must be a JSON object, got " + type_name(doc));
        only_keys(doc, "", {"format", "format_version", "model_class", "producer", "source", "config", "totals", "modules"});
        read_format(doc);
        ModuleTree t;
        t.source = source_;
        if (const json* v = optional(doc, "model_class")) t.model_class = string_of(*v, "/model_class", false);
        if (const json* v = optional(doc, "source")) (void)string_of(*v, "/source", true);
        if (const json* v = optional(doc, "producer"); v && !v->is_object())
            fail("/producer", "must be an object, got " + type_name(*v));
        if (const json* v = optional(doc, "config")) {
            if (v->is_object()) t.config = std::make_shared<const json>(*v);
            else if (!v->is_null()) fail("/config", "must be an object (the model's config.json) or null, got " + type_name(*v));
        }
        read_modules(required(doc, "", "modules"), t);
        check_totals(required(doc, "", "totals"), t);
        return t;
    }

private:
    const std::string& text_;
    const std::string& source_;
    // Parameter path -> (module index, parameter index) of its first listing.
    std::unordered_map<std::string, std::pair<std::size_t, std::size_t>> firsts_;
    std::unordered_set<std::string> tied_paths_;

    [[noreturn]] void fail(const std::string& pointer, const std::string& detail) const {
        const int line = ds_config_line_of(ds_config_key_lines(text_), pointer);
        throw InputError(source_ + (line > 0 ? ":" + std::to_string(line) : "") + ": " +
                         (pointer.empty() ? "/" : pointer) + ": " + detail);
    }

    [[noreturn]] void fail_parse(const json::parse_error& e) const {
        // e.byte: 1-based index of the last character read (a lookahead
        // newline stepped back over, as parse_ds_config_text does).
        std::size_t end = std::min<std::size_t>(e.byte, text_.size());
        if (end > 1 && text_[end - 1] == '\n') --end;
        std::size_t line = 1, line_start = 0;
        for (std::size_t i = 0; i + 1 < end; ++i)
            if (text_[i] == '\n') {
                ++line;
                line_start = i + 1;
            }
        const std::string what = e.what();
        std::string detail = what;
        if (const auto at = what.find("at line "); at != std::string::npos)
            if (const auto colon = what.find(": ", at); colon != std::string::npos) detail = what.substr(colon + 2);
        throw InputError(source_ + ":" + std::to_string(line) + ": malformed JSON at column " +
                         std::to_string(end > line_start ? end - line_start : 1) + ": " + detail);
    }

    // JSON with each key once per object and at most kMaxDepth levels, via
    // the parser's callback (nlohmann keeps no positions: the refusal names
    // the pointer, and fail() finds its line).
    json parse() const {
        struct Frame {
            bool array = false;
            std::size_t index = 0;
            std::string key, pointer;
            std::set<std::string> keys;
        };
        std::vector<Frame> frames;
        std::string duplicate, too_deep;
        auto child = [&frames]() {
            if (frames.empty()) return std::string();
            const Frame& f = frames.back();
            return f.pointer + "/" + (f.array ? std::to_string(f.index) : escaped(f.key));
        };
        const json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
            if (!too_deep.empty()) return false;
            switch (ev) {
                case json::parse_event_t::object_start:
                case json::parse_event_t::array_start:
                    if (depth >= kMaxDepth) {
                        too_deep = child();
                        return false;
                    }
                    frames.push_back({ev == json::parse_event_t::array_start, 0, "", child(), {}});
                    break;
                case json::parse_event_t::key:
                    if (!frames.empty()) {
                        Frame& f = frames.back();
                        f.key = parsed.get<std::string>();
                        if (!f.keys.insert(f.key).second && duplicate.empty()) duplicate = f.pointer + "/" + escaped(f.key);
                    }
                    break;
                case json::parse_event_t::object_end:
                case json::parse_event_t::array_end:
                    if (!frames.empty()) frames.pop_back();
                    if (!frames.empty() && frames.back().array) ++frames.back().index;
                    break;
                case json::parse_event_t::value:
                    if (!frames.empty() && frames.back().array) ++frames.back().index;
                    break;
            }
            return true;
        };
        json doc;
        try {
            doc = json::parse(text_, cb);
        } catch (const json::parse_error& e) {
            if (!too_deep.empty()) fail(too_deep, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
            fail_parse(e);
        } catch (const json::out_of_range& e) {  // a number beyond the double range (1e999)
            throw InputError(source_ + ": a number is out of range (beyond the double range): " + std::string(e.what()));
        }
        if (!too_deep.empty()) fail(too_deep, "nested deeper than " + std::to_string(kMaxDepth) + " levels");
        if (!duplicate.empty()) fail(duplicate, "key written twice (each key once per object)");
        return doc;
    }

    static const json* optional(const json& obj, const char* key) {
        const auto it = obj.find(key);
        return it == obj.end() ? nullptr : &*it;
    }

    const json& required(const json& obj, const std::string& ptr, const char* key) const {
        const json* v = optional(obj, key);
        if (!v) fail(ptr, std::string("missing key '") + key + "'");
        return *v;
    }

    void only_keys(const json& obj, const std::string& ptr, std::initializer_list<const char*> known) const {
        for (auto it = obj.begin(); it != obj.end(); ++it) {
            const std::string& k = it.key();
            if (std::none_of(known.begin(), known.end(), [&k](const char* n) { return k == n; })) {
                std::string list;
                for (const char* n : known) list += (list.empty() ? "" : ", ") + std::string(n);
                fail(ptr + "/" + escaped(k), "unknown key (format version " + std::to_string(kModuleTreeFormatVersion) +
                                                 " has " + list + ")");
            }
        }
    }

    std::string string_of(const json& v, const std::string& ptr, bool may_be_empty) const {
        if (!v.is_string()) fail(ptr, "must be a string, got " + type_name(v) + " " + show(v));
        std::string s = v.get<std::string>();
        if (!may_be_empty && s.empty()) fail(ptr, "must not be empty");
        return s;
    }

    uint64_t count_of(const json& v, const std::string& ptr, uint64_t max) const {
        if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
            fail(ptr, "must be a non-negative integer, got " + type_name(v) + " " + show(v));
        const uint64_t n = v.get<uint64_t>();
        if (n > max) fail(ptr, "is " + std::to_string(n) + ", more than " + std::to_string(max));
        return n;
    }

    void read_format(const json& doc) const {
        const json& f = required(doc, "", "format");
        if (!f.is_string() || f.get<std::string>() != kFormat)
            fail("/format", std::string("must be \"") + kFormat + "\", got " + show(f) +
                                ": not a zeromem module tree (write one with zeromem.dump_module_tree; python/README.md)");
        const json& v = required(doc, "", "format_version");
        if (!v.is_number_integer())
            fail("/format_version", "must be an integer, got " + type_name(v) + " " + show(v));
        if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kModuleTreeFormatVersion)
                                   : v.get<int64_t>() > kModuleTreeFormatVersion)
            fail("/format_version", show(v) + " is newer than this zeromem reads (" +
                                        std::to_string(kModuleTreeFormatVersion) + "): update zeromem, or dump the "
                                        "tree with the zeromem Python package of this release");
        if (v.get<int64_t>() != kModuleTreeFormatVersion)
            fail("/format_version", "must be " + std::to_string(kModuleTreeFormatVersion) + ", got " + show(v));
    }

    // A module path: "" (the root, first) or dotted non-empty segments.
    void check_path(const std::string& name, const std::string& ptr, std::size_t index,
                    const std::unordered_set<std::string>& seen) const {
        if (index == 0) {
            if (!name.empty()) fail(ptr, "the first module is the root, named \"\", got " + show(json(name)));
            return;
        }
        if (name.empty()) fail(ptr, "only the first module (the root) is named \"\"");
        if (name.front() == '.' || name.back() == '.' || name.find("..") != std::string::npos)
            fail(ptr, "'" + name + "' is not a dotted module path (an empty segment)");
        if (seen.count(name)) fail(ptr, "module '" + name + "' is listed twice");
        const auto dot = name.rfind('.');
        const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
        if (!seen.count(parent)) fail(ptr, "module '" + name + "' comes before its parent '" + parent + "' (parents first)");
    }

    void read_modules(const json& mods, ModuleTree& t) {
        if (!mods.is_array()) fail("/modules", "must be a list of modules, got " + type_name(mods));
        if (mods.empty()) fail("/modules", "is empty: the root module at least is listed");
        std::unordered_set<std::string> seen;
        for (std::size_t i = 0; i < mods.size(); ++i) {
            const std::string ptr = "/modules/" + std::to_string(i);
            const json& m = mods[i];
            if (!m.is_object()) fail(ptr, "a module must be an object, got " + type_name(m) + " " + show(m));
            only_keys(m, ptr, {"name", "class", "parameters"});
            TreeModule tm;
            tm.name = string_of(required(m, ptr, "name"), ptr + "/name", true);
            check_path(tm.name, ptr + "/name", i, seen);
            seen.insert(tm.name);
            tm.cls = string_of(required(m, ptr, "class"), ptr + "/class", false);
            t.modules.push_back(std::move(tm));
            read_params(required(m, ptr, "parameters"), ptr + "/parameters", t);
            const TreeModule& done = t.modules.back();
            if (done.own_params > t.largest_module || t.modules.size() == 1) {
                t.largest_module = done.own_params;
                t.largest_module_name = done.name;
                t.largest_module_class = done.cls;
            }
        }
        if (t.total == 0) fail("/modules", "no module holds a parameter");
    }

    std::vector<uint64_t> shape_of(const json& v, const std::string& ptr, uint64_t& numel) const {
        if (!v.is_array()) fail(ptr, "must be a list of dimensions, got " + type_name(v) + " " + show(v));
        std::vector<uint64_t> shape;
        numel = 1;
        for (std::size_t k = 0; k < v.size(); ++k) {
            const uint64_t d = count_of(v[k], ptr + "/" + std::to_string(k), kMaxDim);
            shape.push_back(d);
            if (d != 0 && numel > kMaxParams / d)
                fail(ptr, "holds more than " + std::to_string(kMaxParams) + " elements");
            numel *= d;
        }
        return shape;
    }

    void read_params(const json& ps, const std::string& ptr, ModuleTree& t) {
        if (!ps.is_array()) fail(ptr, "must be a list of parameters, got " + type_name(ps));
        const std::size_t mi = t.modules.size() - 1;
        std::unordered_set<std::string> names, counted;  // own names; tensors summed into own_params
        for (std::size_t k = 0; k < ps.size(); ++k) {
            const std::string pp = ptr + "/" + std::to_string(k);
            const json& p = ps[k];
            if (!p.is_object()) fail(pp, "a parameter must be an object, got " + type_name(p) + " " + show(p));
            only_keys(p, pp, {"name", "shape", "dtype", "requires_grad", "tied_to"});
            TreeParam tp;
            tp.name = string_of(required(p, pp, "name"), pp + "/name", false);
            if (tp.name.find('.') != std::string::npos)
                fail(pp + "/name", "'" + tp.name + "' holds a '.': a parameter's own name is one segment");
            if (!names.insert(tp.name).second) fail(pp + "/name", "parameter '" + tp.name + "' is listed twice in its module");
            tp.shape = shape_of(required(p, pp, "shape"), pp + "/shape", tp.numel);
            tp.dtype = string_of(required(p, pp, "dtype"), pp + "/dtype", false);
            if (!std::all_of(tp.dtype.begin(), tp.dtype.end(),
                             [](char c) { return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'; }))
                fail(pp + "/dtype", show(json(tp.dtype)) + " is not a torch dtype name (e.g. \"float32\", \"bfloat16\")");
            const json& rg = required(p, pp, "requires_grad");
            if (!rg.is_boolean()) fail(pp + "/requires_grad", "must be true or false, got " + type_name(rg) + " " + show(rg));
            tp.requires_grad = rg.get<bool>();
            const std::string& mod = t.modules[mi].name;
            const std::string path = mod.empty() ? tp.name : mod + "." + tp.name;
            if (const json* tie = optional(p, "tied_to")) {
                tp.tied_to = string_of(*tie, pp + "/tied_to", false);
                check_tie(tp, pp, t);
                tied_paths_.insert(path);
            } else {
                firsts_.emplace(path, std::make_pair(mi, t.modules[mi].params.size()));
                t.total += tp.numel;
                if (tp.requires_grad) t.trainable += tp.numel;
                if (t.total > kMaxParams) fail(pp, "the parameters sum to more than " + std::to_string(kMaxParams));
            }
            // parameters(recurse=False) yields each tensor once per module.
            if (counted.insert(tp.tied_to.empty() ? path : tp.tied_to).second) t.modules[mi].own_params += tp.numel;
            t.modules[mi].params.push_back(std::move(tp));
        }
    }

    // A tie names the first listing of the same tensor: earlier, untied,
    // with the same shape, dtype and requires_grad.
    void check_tie(const TreeParam& tp, const std::string& pp, const ModuleTree& t) const {
        const auto it = firsts_.find(tp.tied_to);
        if (it == firsts_.end()) {
            if (tied_paths_.count(tp.tied_to))
                fail(pp + "/tied_to", "'" + tp.tied_to + "' is itself tied: name the tensor's first listing");
            fail(pp + "/tied_to", "'" + tp.tied_to + "' is not a parameter listed before this one");
        }
        const TreeParam& first = t.modules[it->second.first].params[it->second.second];
        auto dims = [](const std::vector<uint64_t>& s) {
            std::string o = "[";
            for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
            return o + "]";
        };
        if (first.shape != tp.shape)
            fail(pp + "/shape", dims(tp.shape) + " differs from the shape " + dims(first.shape) + " of '" + tp.tied_to +
                                    "', the tensor it is tied to");
        if (first.dtype != tp.dtype)
            fail(pp + "/dtype", "'" + tp.dtype + "' differs from the dtype '" + first.dtype + "' of '" + tp.tied_to +
                                    "', the tensor it is tied to");
        if (first.requires_grad != tp.requires_grad)
            fail(pp + "/requires_grad", "differs from that of '" + tp.tied_to + "', the tensor it is tied to");
    }

    void check_totals(const json& totals, const ModuleTree& t) const {
        if (!totals.is_object()) fail("/totals", "must be an object, got " + type_name(totals));
        only_keys(totals, "/totals", {"parameters", "trainable"});
        const uint64_t params = count_of(required(totals, "/totals", "parameters"), "/totals/parameters", kMaxParams);
        const uint64_t trainable = count_of(required(totals, "/totals", "trainable"), "/totals/trainable", kMaxParams);
        if (params != t.total)
            fail("/totals/parameters", "is " + std::to_string(params) + ", but the parameters listed hold " +
                                           std::to_string(t.total) + " (each tied tensor once)");
        if (trainable != t.trainable)
            fail("/totals/trainable", "is " + std::to_string(trainable) + ", but the parameters listed with "
                                          "requires_grad hold " + std::to_string(t.trainable));
    }
};

}  // namespace

ModuleTree parse_module_tree(const std::string& text, const std::string& source) {
    return TreeReader(text, source).read();
}

ModuleTree read_module_tree(const std::string& path) {
    return parse_module_tree(read_text_file(path, "module tree", kMaxBytes), path);
}

}  // namespace zeromem
