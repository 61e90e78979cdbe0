// A `torch.save` file: a zip archive (stored, not compressed; zip64 records always present) whose
// `data.pkl` is a pickle of the object, with each tensor storage in `data/<key>`. DCP writes
// one such archive per saved item into its `.distcp` files. See docs/checkpoints.md.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/error.hpp"
#include "src/io/pickle_reader.hpp"
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

// A torch.save archive opened: its entries, the folder they share ("archive/") and its data.pkl
// read with the caller's allow-list; tensors are rebuilt from it on demand.
struct TorchSaveArchive {
  std::vector<ZipEntry> entries;
  std::string prefix;
  std::string pickle_what;  // "<what>: archive/data.pkl", for messages
  PickleDocument document;

  // ValueError naming the pickle.
  Error fail(std::string_view message) const;
};

// The globals a pickled tensor needs: _rebuild_tensor_v2, OrderedDict and the storage classes.
std::vector<PickleGlobalName> torch_tensor_globals();

// Throws meshsim::Error (ValueError) naming `what` for an archive that is not torch.save's or is
// big-endian, and what read_stored_zip and read_pickle throw.
TorchSaveArchive open_torch_save(std::string_view archive, std::string_view what,
                                 std::span<const PickleGlobalName> allowed,
                                 ZipChecksums checksums = ZipChecksums::kVerify);

// The tensor the _rebuild_tensor_v2 call at `index` makes (any strides and storage offset; values
// copied out row-major). Throws ValueError for anything else there, a dtype meshsim does not
// have, or a storage too short for the tensor's view.
Tensor torch_saved_tensor_at(const TorchSaveArchive& archive, uint32_t index);

// The tensor `torch.save(tensor)` wrote: what open_torch_save and torch_saved_tensor_at throw.
Tensor read_torch_saved_tensor(std::string_view archive, std::string_view what,
                               ZipChecksums checksums = ZipChecksums::kVerify);

}  // namespace meshsim
