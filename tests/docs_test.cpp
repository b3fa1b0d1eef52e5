// The documentation as a clone has it: README.md, CONTRIBUTING.md,
// CHANGELOG.md and docs/*.md. CI runs the README's test command; every
// relative link and #anchor resolves (anchors as GitHub derives them from
// headings); nothing cites a path outside the repository or a tracker number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path root() { return fs::path(ZEROMEM_SOURCE_DATA_DIR).parent_path(); }

std::string read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

/// The hand-written and generated documents of the repository.
std::vector<fs::path> documents() {
    std::vector<fs::path> docs = {root() / "README.md", root() / "CONTRIBUTING.md", root() / "CHANGELOG.md"};
    for (const auto& e : fs::directory_iterator(root() / "docs"))
        if (e.path().extension() == ".md") docs.push_back(e.path());
    std::sort(docs.begin() + 3, docs.end());
    return docs;
}

/// The text of a document outside its fenced code blocks, line by line.
std::vector<std::string> prose_lines(const std::string& text) {
    std::vector<std::string> out;
    bool fenced = false;
    for (const std::string& l : lines_of(text)) {
        if (l.rfind("```", 0) == 0) {
            fenced = !fenced;
            continue;
        }
        if (!fenced) out.push_back(l);
    }
    return out;
}

/// GitHub's anchor of a heading: lower case, spaces to hyphens, every other
/// character but letters, digits, '-' and '_' dropped; a repeated heading
/// gets "-1", "-2", ...
std::set<std::string> anchors(const std::string& text) {
    std::set<std::string> out;
    std::map<std::string, int> seen;
    for (const std::string& l : prose_lines(text)) {
        const size_t hashes = l.find_first_not_of('#');
        if (hashes == 0 || hashes == std::string::npos || hashes > 6 || l[hashes] != ' ') continue;
        std::string slug;
        for (char c : l.substr(hashes + 1)) {
            const unsigned char u = static_cast<unsigned char>(c);
            if (std::isalnum(u)) slug += static_cast<char>(std::tolower(u));
            else if (c == ' ') slug += '-';
            else if (c == '-' || c == '_') slug += c;
        }
        const int n = seen[slug]++;
        out.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
    }
    return out;
}


// README's headline of the public-run ledger states the totals of the
// generated docs/accuracy.md (scripts/ledger.py writes its Totals table).
TEST(Docs, ReadmeStatesTheLedgerTotals) {
    const std::string acc = read(root() / "docs" / "accuracy.md");
    const std::regex row(R"(\| (GPU|HOST) \| (\d+) \| (\d+) of (\d+) \| (\d+) \| (\d+) \|)");
    std::map<std::string, std::smatch> totals;
    for (auto it = std::sregex_iterator(acc.begin(), acc.end(), row); it != std::sregex_iterator(); ++it)
        totals[(*it)[1].str()] = *it;
    ASSERT_EQ(totals.size(), 2u) << "no Totals table in docs/accuracy.md";
    std::string readme = read(root() / "README.md");
    std::replace(readme.begin(), readme.end(), '\n', ' ');
    const auto& g = totals["GPU"];
    const auto& h = totals["HOST"];
    const std::string gpu = "GPU " + g[3].str() + " of " + g[4].str() + " right";
    const std::string tight = g[6].str() + " tight";
    const std::string host = "host " + h[3].str() + " of " + h[4].str();
    for (const std::string& want : {gpu, tight, host})
        EXPECT_NE(readme.find(want), std::string::npos) << "README.md does not say '" << want << "' (docs/accuracy.md)";
}

}  // namespace

// .ci/run is the CI entry point and says it runs the README's second
// command (the whole test suite on a fresh machine): the same line.
TEST(Docs, CiRunsTheReadmeTestCommand) {
    const std::vector<std::string> readme = lines_of(read(root() / "README.md"));
    std::vector<std::string> commands;  // the last line of each of the first two ```sh blocks
    for (size_t i = 0; i < readme.size() && commands.size() < 2; ++i) {
        if (readme[i] != "```sh") continue;
        size_t j = i + 1;
        while (j < readme.size() && readme[j] != "```") ++j;
        ASSERT_LT(j, readme.size()) << "unclosed ```sh block at README.md:" << i + 1;
        commands.push_back(readme[j - 1]);
        i = j;
    }
    ASSERT_EQ(commands.size(), 2u);
    EXPECT_NE(commands[0].find("./build/zeromem estimate"), std::string::npos) << commands[0];
    EXPECT_NE(commands[1].find("ctest --test-dir build"), std::string::npos) << commands[1];
    const std::vector<std::string> ci = lines_of(read(root() / ".ci" / "run"));
    EXPECT_NE(std::find(ci.begin(), ci.end(), commands[1]), ci.end())
        << ".ci/run does not run the README's second command:\n" << commands[1];
}

// Every relative link of every document names a file of the repository, and
// its #anchor a heading of that file (or of the same document for "#...").
TEST(Docs, RelativeLinksAndAnchorsResolve) {
    const std::regex link(R"(\]\(([^)\s]+)\))");
    for (const fs::path& doc : documents()) {
        const std::vector<std::string> prose = prose_lines(read(doc));
        for (size_t n = 0; n < prose.size(); ++n) {
            for (std::sregex_iterator it(prose[n].begin(), prose[n].end(), link), end; it != end; ++it) {
                const std::string target = (*it)[1];
                if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) continue;
                const size_t hash = target.find('#');
                const std::string file = target.substr(0, hash);
                const fs::path resolved = file.empty() ? doc : doc.parent_path() / file;
                const std::string where = doc.filename().string() + ": link " + target;
                if (!fs::exists(resolved)) {
                    ADD_FAILURE() << where << ": no such file " << resolved;
                    continue;
                }
                if (hash == std::string::npos) continue;
                ASSERT_EQ(resolved.extension(), ".md") << where;
                EXPECT_EQ(anchors(read(resolved)).count(target.substr(hash + 1)), 1u)
                    << where << ": no heading with that anchor in " << resolved.filename();
            }
        }
    }
}

// A clone has no project-local reference folder, and behaviours are named,
// not numbered: no document cites ../shared or /work/shared, or says "issue N".
TEST(Docs, CiteNoLocalPathsOrTrackerNumbers) {
    const std::regex tracker(R"([Ii]ssues? #?[0-9])");
    for (const fs::path& doc : documents()) {
        const std::vector<std::string> text = lines_of(read(doc));
        for (size_t n = 0; n < text.size(); ++n) {
            const std::string where = doc.filename().string() + ":" + std::to_string(n + 1);
            EXPECT_EQ(text[n].find("../shared"), std::string::npos) << where;
            EXPECT_EQ(text[n].find("/work/shared"), std::string::npos) << where;
            EXPECT_FALSE(std::regex_search(text[n], tracker)) << where << ": " << text[n];
        }
    }
}
