// A `torch.save` file: a zip archive (stored, not compressed; zip64 records always present) whose
// `data.pkl` is a pickle of the object, with each tensor storage in `data/<key>`. DCP writes
// one such archive per saved item into its `.distcp` files. See docs/checkpoints.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/tensor/tensor.hpp"

namespace meshsim {

struct ZipEntry {
  std::string name;       // "archive/data.pkl"
  std::string_view data;  // into the archive's bytes
};

// The entries of a zip archive that stores them uncompressed, each checked against its CRC-32.
// Throws meshsim::Error (ValueError) naming `what` and the byte offset for anything else:
// compression, encryption, multi-disk archives, records that run past the archive, overlapping
// or duplicated entries, a checksum that does not match. (Fuzzing turns the checksums off to
// reach the parsers behind them, as a resealed file would.)
enum class ZipChecksums { kVerify, kIgnore };
std::vector<ZipEntry> read_stored_zip(std::string_view archive, std::string_view what,
                                      ZipChecksums checksums = ZipChecksums::kVerify);

// The tensor `torch.save(tensor)` wrote (any strides and storage offset; values copied out
// row-major). Throws meshsim::Error (ValueError) naming `what` for an archive that holds
// anything else, a dtype meshsim does not have, a big-endian archive, or a storage too short for
// the tensor's view.
Tensor read_torch_saved_tensor(std::string_view archive, std::string_view what,
                               ZipChecksums checksums = ZipChecksums::kVerify);

}  // namespace meshsim
