// Writes what `torch.save(tensor)` writes: a zip archive whose entries are stored uncompressed,
// each entry's data starting at a multiple of 64 bytes (PyTorch pads the local header's extra
// field so that storages can be memory-mapped), with zip64 end records always present, as
// PyTorch's own writer leaves them. Entry data is borrowed, so a large tensor is never copied:
// the archive is a list of pieces to write in order. See docs/checkpoints.md.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/tensor/tensor.hpp"

namespace meshsim {

class StoredZipWriter {
 public:
  // Sizes and offsets from `zip64_from` up are written as zip64 fields (tests lower it to
  // exercise them without writing 4 GiB).
  explicit StoredZipWriter(uint64_t alignment = 64, uint64_t zip64_from = 0xffffffff);
  StoredZipWriter(StoredZipWriter&&) = default;  // moves keep the pieces' views valid
  StoredZipWriter(const StoredZipWriter&) = delete;
  StoredZipWriter& operator=(const StoredZipWriter&) = delete;

  // Adds an entry whose data the writer keeps.
  void add(std::string name, std::string data);
  // Adds an entry whose data the caller keeps alive until the pieces are written.
  void add_borrowed(std::string name, std::string_view data);
  // Writes the central directory and the end records. No entry may be added after.
  void finish();

  // The archive, in order; valid while the writer (and any borrowed data) lives.
  std::span<const std::string_view> pieces() const { return pieces_; }
  uint64_t size() const { return size_; }

 private:
  struct Entry {
    std::string name;
    uint32_t crc = 0;
    uint64_t size = 0;
    uint64_t header_offset = 0;
  };
  std::string_view keep(std::string bytes);
  void append(std::string_view piece);

  uint64_t alignment_;
  uint64_t zip64_from_;
  std::deque<std::string> owned_;  // a deque never moves what it holds
  std::vector<std::string_view> pieces_;
  std::vector<Entry> entries_;
  uint64_t size_ = 0;
  bool finished_ = false;
};

// A contiguous tensor's strides as PyTorch gives them: each dim's stride is the product of the
// later sizes, a size of 0 counting as 1.
std::vector<int64_t> torch_contiguous_strides(std::span<const int64_t> shape);

// The archive of `torch.save(tensor)` for a tensor of a dtype torch.save names: its elements as
// one storage, the view contiguous over it. The archive's inner directory is "archive", as for
// any stream; its serialization id is derived from the tensor, so equal saves write equal bytes.
// `tensor` must outlive the writer.
StoredZipWriter torch_save_tensor(const Tensor& tensor);

}  // namespace meshsim
