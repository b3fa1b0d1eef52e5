// Line numbers of the keys of a DeepSpeed config text, so that `check` can
// name "file:line" beside each finding's JSON pointer. nlohmann::json keeps
// no positions, so this is a small scanner of its own over the same grammar
// parse_ds_config_text accepts (JSON with // and /* */ comments, as
// DeepSpeed's hjson loader and nlohmann's ignore_comments read it). It only
// tracks where keys start; the parse proper stays nlohmann's.
#include "zeromem/ds_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace zeromem {

namespace {

// RFC 6901 escaping of one key (nlohmann::json_pointer escapes ~ and /).
std::string escaped(const std::string& key) { return (nlohmann::json::json_pointer() / key).to_string().substr(1); }

class KeyLineScanner {
public:
    explicit KeyLineScanner(const std::string& text) : t_(text) {}

    std::map<std::string, int> run() {
        skip_blank();
        if (i_ < t_.size()) value("", 0);
        return lines_;
    }

private:
    const std::string& t_;
    std::size_t i_ = 0;
    int line_ = 1;
    std::map<std::string, int> lines_;

    bool at_end() const { return i_ >= t_.size(); }
    void advance() {
        if (t_[i_] == '\n') ++line_;
        ++i_;
    }

    void skip_blank() {
        while (!at_end()) {
            if (std::isspace(static_cast<unsigned char>(t_[i_]))) {
                advance();
            } else if (t_.compare(i_, 2, "//") == 0) {
                while (!at_end() && t_[i_] != '\n') advance();
            } else if (t_.compare(i_, 2, "/*") == 0) {
                i_ += 2;
                while (!at_end() && t_.compare(i_, 2, "*/") != 0) advance();
                if (!at_end()) i_ += 2;
            } else {
                return;
            }
        }
    }

    /// A string at i_ (opening quote); returns its text without the quotes,
    /// its escapes decoded as JSON decodes them (a key "a\u0000b" is the
    /// parsed key's pointer); a malformed escape is kept as written.
    std::string string_token() {
        std::string s;
        const std::size_t start = i_;
        bool escapes = false;
        ++i_;  // opening quote
        while (!at_end() && t_[i_] != '"') {
            if (t_[i_] == '\\' && i_ + 1 < t_.size()) {
                ++i_;
                escapes = true;
                if (t_[i_] != '"' && t_[i_] != '\\') s += '\\';
            }
            s += t_[i_];
            advance();
        }
        if (!at_end()) ++i_;  // closing quote
        if (escapes) {
            try {
                return nlohmann::json::parse(t_.substr(start, i_ - start)).get<std::string>();
            } catch (const nlohmann::json::exception&) {
            }
        }
        return s;
    }

    /// Deeper than the loader accepts (parse_ds_config_text refuses 32
    /// levels): not looked into, so the recursion stays shallow on any text.
    static constexpr int kMaxDepth = 40;

    void value(const std::string& ptr, int depth) {
        skip_blank();
        if (at_end()) return;
        const char c = t_[i_];
        if ((c == '{' || c == '[') && depth >= kMaxDepth) {
            i_ = t_.size();
            return;
        }
        if (c == '{') return object(ptr, depth + 1);
        if (c == '[') return array(ptr, depth + 1);
        if (c == '"') {
            (void)string_token();
            return;
        }
        // number, true, false, null
        while (!at_end() && t_[i_] != ',' && t_[i_] != '}' && t_[i_] != ']' && t_[i_] != '/' &&
               !std::isspace(static_cast<unsigned char>(t_[i_])))
            advance();
    }

    void object(const std::string& ptr, int depth) {
        ++i_;  // {
        for (;;) {
            skip_blank();
            if (at_end()) return;
            if (t_[i_] == '}') {
                ++i_;
                return;
            }
            if (t_[i_] != '"') return;  // malformed: stop here
            const int key_line = line_;
            const std::string child = ptr + "/" + escaped(string_token());
            lines_.emplace(child, key_line);  // a duplicate key is refused by the loader anyway
            skip_blank();
            if (at_end() || t_[i_] != ':') return;
            ++i_;
            value(child, depth);
            skip_blank();
            if (!at_end() && t_[i_] == ',') ++i_;
        }
    }

    void array(const std::string& ptr, int depth) {
        ++i_;  // [
        for (std::size_t index = 0;; ++index) {
            skip_blank();
            if (at_end()) return;
            if (t_[i_] == ']') {
                ++i_;
                return;
            }
            const std::string child = ptr + "/" + std::to_string(index);
            lines_.emplace(child, line_);
            const std::size_t before = i_;
            value(child, depth);
            skip_blank();
            if (!at_end() && t_[i_] == ',') ++i_;
            else if (i_ == before) return;  // malformed: no progress
        }
    }
};

}  // namespace

std::map<std::string, int> ds_config_key_lines(const std::string& text) { return KeyLineScanner(text).run(); }

int json_error_line(const std::string& text, std::size_t byte) {
    int line = 1;
    for (std::size_t i = 0; i + 1 < std::min<std::size_t>(byte, text.size()); ++i)
        if (text[i] == '\n') ++line;
    return line;
}

int ds_config_line_of(const std::map<std::string, int>& lines, const std::string& pointer) {
    std::string p = pointer;
    while (!p.empty() && p != "/") {
        if (const auto it = lines.find(p); it != lines.end()) return it->second;
        const auto slash = p.rfind('/');
        if (slash == std::string::npos || slash == 0) break;
        p = p.substr(0, slash);
    }
    return 0;
}

}  // namespace zeromem
