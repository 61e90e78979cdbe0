// Record trees in Boost.Serialization archives (binary, text or XML) inside the checkpoint
// envelope. The reader trusts nothing: every count is checked against what is left of the payload
// and a memory budget before anything is allocated, nesting is bounded, nothing is tracked by
// pointer, and whatever Boost throws becomes a meshsim error naming the record.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "src/io/envelope.hpp"
#include "src/io/record_tree.hpp"

namespace meshsim {

// Deeper trees are refused: the deepest record meshsim writes (a DTensor whose derived mesh's
// root has flattened meshes) nests seven objects.
inline constexpr size_t kMaxRecordDepth = 12;

// How a reader hands out kBytes values: copied into the tree, or (binary archives) borrowed from
// the payload, which must then outlive the tree.
enum class BytesOut { kCopy, kBorrow };

// The archive alone, without the envelope.
std::string write_record_payload(const RecordObject& root, ArchiveFormat format);
// Throws meshsim::Error (RuntimeError "corrupt {what} record (... archive): byte N: ...") on
// anything but a complete, well-formed tree as the writer writes it; also when bytes are left
// over. `base_offset`: where the payload starts in its file, for the offsets in messages.
RecordObject read_record_payload(std::string_view payload, ArchiveFormat format,
                                 std::string_view what, BytesOut bytes_out = BytesOut::kCopy,
                                 size_t base_offset = 0);

// A sealed record in pieces, in file order: the envelope's header, then the archive, whose
// borrowed bytes (in binary archives) stay where they are instead of being copied in. The
// pieces point into this object and into the borrowed memory.
struct SealedRecord {
  std::string header;
  std::deque<std::string> owned;          // archive text between borrowed bytes
  std::vector<std::string_view> payload;  // in order
  std::vector<std::string_view> pieces() const;
};
SealedRecord seal_record_in_pieces(RecordKind kind, uint32_t record_version,
                                   const RecordObject& root, ArchiveFormat format);
// The whole file in one string: envelope around the archive.
std::string seal_record(RecordKind kind, uint32_t record_version, const RecordObject& root,
                        ArchiveFormat format);

struct OpenedRecord {
  uint32_t record_version = 0;
  ArchiveFormat format = ArchiveFormat::kBinary;
  RecordObject root;
};
// Opens the envelope (open_envelope's checks), refuses another kind of record or a version
// outside [1, newest_version], then reads the tree.
OpenedRecord open_record(std::string_view file, RecordKind kind, uint32_t newest_version,
                         BytesOut bytes_out = BytesOut::kCopy);

}  // namespace meshsim
