// Reading the installed deepspeed, torch and transformers without starting
// Python (zeromem/stack_detect.h): PEP 503 names, core metadata, pip freeze,
// prefixes and the python3 on PATH, all on fake prefixes made here.
#include "zeromem/request.h"
#include "zeromem/stack_detect.h"

#include "fake_python_env.h"
#include "input_error.h"

#include <gtest/gtest.h>

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;
using namespace stacktest;

// PEP 503: lower case, runs of '-', '_', '.' one '-'. "deep_speed" is
// another distribution than "deepspeed" (the separator is kept as '-').
TEST(StackDetect, NamesNormalisePerPep503) {
    EXPECT_EQ(normalize_distribution_name("DeepSpeed"), "deepspeed");
    EXPECT_EQ(normalize_distribution_name("Deepspeed"), "deepspeed");
    EXPECT_EQ(normalize_distribution_name("deep_speed"), "deep-speed");
    EXPECT_EQ(normalize_distribution_name("Deep._-Speed"), "deep-speed");
    EXPECT_EQ(normalize_distribution_name("zope.interface"), "zope-interface");
    EXPECT_EQ(normalize_distribution_name("Transformers"), "transformers");
}

// Core metadata: the Version: header before the first blank line (what
// comes after is the description); CRLF line ends; none is an error naming
// the setting and the file.
TEST(StackDetect, MetadataVersionIsTheHeader) {
    EXPECT_EQ(metadata_version(metadata("torch", "2.3.1+cu121"), "M", "stack.torch"), "2.3.1+cu121");
    EXPECT_EQ(metadata_version("Metadata-Version: 2.1\r\nName: torch\r\nversion: 2.4.0\r\n", "M", "stack.torch"), "2.4.0");
    const std::string e = error_of([] { metadata_version("Name: torch\n\nVersion: 2.3.1\n", "/x/METADATA", "stack.torch"); });
    EXPECT_TRUE(contains(e, "stack.torch")) << e;
    EXPECT_TRUE(contains(e, "/x/METADATA")) << e;
    EXPECT_TRUE(contains(error_of([] { metadata_version("Version: latest\n", "M", "stack.torch"); }), "stack.torch"));
}

// pip freeze: NAME==VERSION lines; comments, blank lines, options, -e and
// NAME @ URL skipped (the last two with a note); extras and markers
// stripped; case and separators per PEP 503.
TEST(StackDetect, PipFreezeReadsTheThreePackages) {
    const FoundStack s = parse_pip_freeze(
        "# pip freeze\n"
        "accelerate==0.33.0\r\n"
        "DeepSpeed==0.14.4  # pinned\n"
        "\n"
        "-i https://example.org/simple\n"
        "-e git+https://github.com/huggingface/transformers@abc#egg=transformers\n"
        "torch[cuda]==2.3.1+cu121 ; python_version >= \"3.8\"\n"
        "tokenizers @ file:///tmp/tokenizers-0.19.1.whl\n",
        "req.txt");
    ASSERT_TRUE(s.deepspeed && s.torch);
    EXPECT_EQ(s.deepspeed->version, "0.14.4");
    EXPECT_EQ(s.deepspeed->source, "req.txt:3: DeepSpeed==0.14.4");
    EXPECT_EQ(s.torch->version, "2.3.1+cu121");
    EXPECT_FALSE(s.transformers);  // the -e line has no version
    EXPECT_EQ(s.where, "req.txt");
    ASSERT_EQ(s.notes.size(), 3u);
    EXPECT_TRUE(contains(s.notes[1], "req.txt:6: editable install skipped")) << s.notes[1];
    EXPECT_TRUE(contains(s.notes[2], "req.txt:8: tokenizers installed from a URL skipped")) << s.notes[2];
    // deep_speed is not deepspeed.
    EXPECT_FALSE(parse_pip_freeze("deep_speed==1.0\n", "f").deepspeed);
}

// A line that is not a requirement, a package listed twice and a version
// that is not one are errors naming the file and the line.
TEST(StackDetect, PipFreezeBadLinesNameFileAndLine) {
    EXPECT_TRUE(contains(error_of([] { parse_pip_freeze("torch==2.3.1\n\ntransformers>=4.44\n", "r.txt"); }),
                         "r.txt:3: 'transformers>=4.44' is not NAME==VERSION"));
    EXPECT_TRUE(contains(error_of([] { parse_pip_freeze("torch==2.3.1\nTorch==2.4.0\n", "r.txt"); }), "r.txt:2: torch is listed twice"));
    const std::string v = error_of([] { parse_pip_freeze("x==1\ntorch==abc\n", "r.txt"); });
    EXPECT_TRUE(contains(v, "stack.torch (r.txt:2)")) << v;
    EXPECT_TRUE(contains(error_of([] { parse_pip_freeze("==1.0\n", "r.txt"); }), "r.txt:1:"));
    EXPECT_TRUE(contains(error_of([] { parse_pip_freeze("torch==\n", "r.txt"); }), "r.txt:1:"));
}

// A prefix's package directories, newest Python first (3.11 before 3.9:
// numeric, not by name), site-packages and dist-packages.
TEST(StackDetect, PrefixDirsNewestPythonFirst) {
    ScratchDir d("prefix_dirs");
    fs::create_directories(d.root / "lib/python3.9/site-packages");
    fs::create_directories(d.root / "lib/python3.11/site-packages");
    fs::create_directories(d.root / "lib/python3.11/dist-packages");
    fs::create_directories(d.root / "lib/python3.x/site-packages");  // not a Python version
    const auto dirs = prefix_package_dirs(d.str());
    ASSERT_EQ(dirs.size(), 3u);
    EXPECT_EQ(fs::path(dirs[0]).parent_path().filename(), "python3.11");
    EXPECT_EQ(fs::path(dirs[2]).parent_path().filename(), "python3.9");
    EXPECT_TRUE(prefix_package_dirs((d.root / "absent").string()).empty());
}

// The metadata directories: names matched per PEP 503 (DeepSpeed matches,
// deep_speed does not), the version read from METADATA (not the directory
// name), a setuptools .egg-info file or directory, the newest of two
// installs with a note; a METADATA without a version is an error naming the
// setting and the file.
TEST(StackDetect, ReadsDistInfoAndEggInfo) {
    ScratchDir d("read_dirs");
    add_dist_info(d.root, "DeepSpeed-0.14.4", "DeepSpeed", "0.14.4");
    add_dist_info(d.root, "deep_speed-0.99.0", "deep_speed", "0.99.0");
    add_dist_info(d.root, "torch-2.3.1", "torch", "2.3.1+cu121");
    add_dist_info(d.root, "torch-2.2.0", "torch", "2.2.0");
    const fs::path sp = d.root / "lib/python3.11/site-packages";
    write_file(sp / "transformers-4.44.2-py3.11.egg-info", metadata("transformers", "4.44.2"));
    FoundStack s = read_package_dirs(prefix_package_dirs(d.str()), "$VIRTUAL_ENV=" + d.str());
    ASSERT_TRUE(s.deepspeed && s.torch && s.transformers);
    EXPECT_EQ(s.deepspeed->version, "0.14.4");
    EXPECT_EQ(s.deepspeed->source, "$VIRTUAL_ENV=" + d.str() + ": DeepSpeed-0.14.4.dist-info");
    EXPECT_EQ(s.torch->version, "2.3.1+cu121");
    EXPECT_EQ(s.transformers->version, "4.44.2");
    ASSERT_EQ(s.notes.size(), 1u);
    EXPECT_TRUE(contains(s.notes[0], "torch is installed more than once")) << s.notes[0];

    fs::remove_all(sp / "transformers-4.44.2-py3.11.egg-info");
    write_file(sp / "Transformers-4.40.0.egg-info" / "PKG-INFO", metadata("Transformers", "4.40.0"));
    s = read_package_dirs(prefix_package_dirs(d.str()), "x");
    ASSERT_TRUE(s.transformers);
    EXPECT_EQ(s.transformers->version, "4.40.0");

    write_file(sp / "torch-2.2.0.dist-info" / "METADATA", "Name: torch\n");
    const std::string e = error_of([&] { read_package_dirs(prefix_package_dirs(d.str()), "x"); });
    EXPECT_TRUE(contains(e, "stack.torch")) << e;
    EXPECT_TRUE(contains(e, "torch-2.2.0.dist-info/METADATA")) << e;
}

// $VIRTUAL_ENV before $CONDA_PREFIX; nothing set: nothing read.
TEST(StackDetect, VirtualEnvBeforeCondaPrefix) {
    ScratchDir venv("venv_first"), conda("conda_second");
    make_stack_env(venv.root);
    add_dist_info(conda.root, "torch-2.1.0", "torch", "2.1.0", "10");
    StackEnvironment env;
    env.virtual_env = venv.str();
    env.conda_prefix = conda.str();
    FoundStack s = detect_stack(env, false);
    ASSERT_TRUE(s.torch);
    EXPECT_EQ(s.torch->version, "2.3.1");
    EXPECT_EQ(s.where, "$VIRTUAL_ENV=" + venv.str());
    env.virtual_env.clear();
    s = detect_stack(env, false);
    ASSERT_TRUE(s.torch);
    EXPECT_EQ(s.torch->version, "2.1.0");
    EXPECT_EQ(s.torch->source, "$CONDA_PREFIX=" + conda.str() + ": torch-2.1.0.dist-info");
    EXPECT_FALSE(s.deepspeed);
    EXPECT_EQ(detect_stack(StackEnvironment{}, false).where, "");
}

// The python3 on PATH, resolved without running it: a virtualenv
// (pyvenv.cfg beside bin/), a pyenv shim (PYENV_VERSION, else the root's
// version file; "system" searches PATH on), a symlink to the interpreter.
TEST(StackDetect, PythonOnPathWithoutRunningIt) {
    ScratchDir d("python_on_path");
    auto exe = [](const fs::path& p, const std::string& text) {
        write_file(p, text);
        fs::permissions(p, fs::perms::owner_all);
    };
    // A virtualenv.
    const fs::path venv = d.root / "venv";
    exe(venv / "bin/python3", "\x7f" "ELF");
    write_file(venv / "pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
    make_stack_env(venv);
    auto py = python_on_path("/nonexistent:" + (venv / "bin").string(), "");
    ASSERT_TRUE(py);
    EXPECT_EQ(py->prefix, venv.string());
    ASSERT_EQ(py->dirs.size(), 1u);
    EXPECT_EQ(read_package_dirs(py->dirs, "p").deepspeed->version, "0.14.4");
    // A pyenv root: shims/python3 is a script; versions/3.11.9 the prefix.
    const fs::path root = d.root / "pyenv";
    exe(root / "shims/python3", "#!/usr/bin/env bash\nexec pyenv exec python3 \"$@\"\n");
    write_file(root / "version", "3.11.9\n");
    add_dist_info(root / "versions/3.11.9", "torch-2.4.1", "torch", "2.4.1");
    py = python_on_path((root / "shims").string() + ":" + (venv / "bin").string(), "");
    ASSERT_TRUE(py);
    EXPECT_EQ(py->prefix, (root / "versions/3.11.9").string());
    EXPECT_TRUE(contains(py->how, "pyenv shim")) << py->how;
    EXPECT_EQ(python_on_path((root / "shims").string(), "system"), std::nullopt);
    py = python_on_path((root / "shims").string() + ":" + (venv / "bin").string(), "system");
    ASSERT_TRUE(py);
    EXPECT_EQ(py->prefix, venv.string());
    // A symlink to the interpreter: the prefix above the real bin/.
    const fs::path real = d.root / "opt/py/bin/python3.12";
    exe(real, "\x7f" "ELF");
    add_dist_info(d.root / "opt/py", "transformers-4.44.2", "transformers", "4.44.2", "12");
    fs::create_directories(d.root / "links");
    fs::create_symlink(real, d.root / "links/python3");
    py = python_on_path((d.root / "links").string(), "");
    ASSERT_TRUE(py);
    EXPECT_EQ(py->prefix, fs::canonical(d.root / "opt/py").string());
    EXPECT_EQ(read_package_dirs(py->dirs, "p").transformers->version, "4.44.2");
    // --stack auto: the virtualenv's package missing, the python3 on PATH's read.
    StackEnvironment env;
    env.virtual_env = venv.string();
    env.path = (d.root / "links").string();
    fs::remove_all(venv / "lib/python3.11/site-packages/transformers-4.44.2.dist-info");
    const FoundStack s = detect_stack(env, true);
    ASSERT_TRUE(s.transformers && s.deepspeed);
    EXPECT_EQ(s.deepspeed->source.rfind("$VIRTUAL_ENV=", 0), 0u) << s.deepspeed->source;
    EXPECT_EQ(s.transformers->source.rfind("python3 on PATH (", 0), 0u) << s.transformers->source;
}
