// --from FILE: a launcher's own training file read as zeromem's inputs.
// LLaMA-Factory's training YAML, accelerate's config YAML and a Hugging Face
// TrainingArguments JSON already hold the model, batch, sequence, LoRA,
// precision and DeepSpeed settings of a run; each key that changes memory
// fills the request field of the flag with the same meaning, and says so in
// --explain ("train.yaml line 27: per_device_train_batch_size").
#pragma once

#include "zeromem/request.h"

#include <map>
#include <string>
#include <vector>

namespace zeromem {

/// What a launch file gave: the request fields it sets (everything else
/// unset) and its trail (where each came from, what the reader said).
struct LaunchFile {
    Request values;
    LaunchTrail trail;
};

/// Reads `path`, recognising the format by content. `data_dir` holds the
/// model presets a Hub id without a cached config.json is matched to. Throws
/// InputError "--from: FILE line N: KEY: ..." for a malformed file, a value
/// of the wrong type, a key that changes memory in a way zeromem does not
/// model, or a file of none of the three kinds.
LaunchFile read_launch_file(const std::string& path, const std::string& data_dir);

/// The same on text already read (`path` names it and anchors its relative
/// paths); what the fuzz target drives.
LaunchFile parse_launch_file(const std::string& text, const std::string& path, const std::string& data_dir);

/// `req` with every field the command line left unset taken from `file`;
/// a flag given as well wins, with a note naming the file's value it
/// replaces. The result carries the file's sources, notes and warnings
/// (Request::launch), which resolve_request moves into the Resolved.
Request merge_launch_file(const Request& req, const LaunchFile& file);

/// " (--seq-len is FILE line 14: cutoff_len of --from)" when `message` (an
/// InputError's text) names first a flag whose value came from the launch
/// file, else empty: the faces append it, so a refusal of a value the user
/// never typed as a flag points at the file's line.
std::string launch_file_origin(const Request& req, const std::string& message);

/// resolve_request's last step: every provenance entry a flag filled from
/// the launch file names the file's line and key instead of the flag, and
/// the file's notes and warnings join the Resolved's.
void attribute_launch_file(const Request& req, Resolved& r);

}  // namespace zeromem
