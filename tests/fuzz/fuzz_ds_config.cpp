// libFuzzer target: the DeepSpeed config parser, its key-line scanner, schema
// validation, reader ("auto" resolution, refusals, notes) and `check` on
// arbitrary bytes. Only zeromem::InputError may escape the library; anything
// else (another exception, a sanitizer report, a hang) is a bug.
#include "zeromem/config_check.h"
#include "zeromem/ds_config.h"
#include "zeromem/util.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    const std::string text(reinterpret_cast<const char*>(data), size);
    // `check` locates findings by line; the scanner must stop on any text.
    (void)ds_config_line_of(ds_config_key_lines(text), "/zero_optimization/stage");
    nlohmann::json cfg;
    try {
        cfg = parse_ds_config_text(text, "fuzz.json");
    } catch (const InputError&) {
        return 0;
    }
    for (const auto launcher : {Launcher::deepspeed, Launcher::hf_trainer, Launcher::accelerate}) {
        CheckOptions o;
        o.launcher = launcher;
        o.autos.hidden_size = 4096;
        o.autos.world_size = 8;
        o.gpus_known = true;
        (void)check_ds_config(cfg, o);
    }
    try {
        AutoSources autos;
        autos.hidden_size = 4096;
        autos.world_size = 8;
        ZeroSettings zero;
        TrainingSettings train;
        Provenance prov;
        apply_ds_config(cfg, "fuzz.json", autos, zero, train, prov);
        (void)ds_config_notes(cfg, "fuzz.json");
        complete_batch_settings(train, 8, prov);
    } catch (const InputError&) {
    }
    return 0;
}
