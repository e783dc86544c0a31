#pragma once
// A fingerprint of the files a bundle's model is made of, for an image's identity: a bundle exported again
// under the same name with other weights (a retrained default model) must not resume a folder of the old
// one's images. Reading 14 GB for each batch would take tens of seconds, so it samples: each file's name and
// size, its first 64 KiB (a safetensors header names every tensor's dtype, shape and place) and 64 blocks of
// 4 KiB spread over the rest. A retrained model changes nearly every byte; a change confined to a few
// tensors can pass unseen (docs/cli.md says so).
#include <string>

#include "engine/bundle.h"

namespace sjd::engine {

// "sampled-fnv1a64:" and 16 hex digits, over the transformer's weight files, the VQ decoder's, the tokenizer's
// file and LlamaGen's caption encoder's, in the bundle's order (a sharded checkpoint's index followed by its
// shards). InputError naming the file when one cannot be read.
std::string weights_fingerprint(const Bundle& bundle);

}  // namespace sjd::engine
