#include "src/io/torch_save_writer.hpp"

#include <fmt/format.h>

#include "src/error.hpp"
#include "src/io/pickle_writer.hpp"
#include "src/io/tensor_digest.hpp"
#include "src/io/torch_storage_classes.hpp"
#include "src/io/zip_format.hpp"

namespace meshsim {

namespace {

// The extra field PyTorch pads local headers with ("FB", then filler bytes).
constexpr uint16_t kPaddingExtra = 0x4246;
constexpr size_t kLocalHeaderSize = 30;
// Version 4.5: zip64.
constexpr uint16_t kZipVersion = 45;

class LittleEndian {
 public:
  LittleEndian& u16(uint64_t v) { return put(v, 2); }
  LittleEndian& u32(uint64_t v) { return put(v, 4); }
  LittleEndian& u64(uint64_t v) { return put(v, 8); }
  LittleEndian& text(std::string_view s) {
    out_.append(s);
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  LittleEndian& put(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string out_;
};

}  // namespace

std::vector<int64_t> torch_contiguous_strides(std::span<const int64_t> shape) {
  std::vector<int64_t> out(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) out[d - 1] = out[d] * std::max<int64_t>(shape[d], 1);
  return out;
}

StoredZipWriter::StoredZipWriter(uint64_t alignment, uint64_t zip64_from)
    : alignment_(alignment), zip64_from_(zip64_from) {
  MESHSIM_ASSERT(alignment_ > 0, "a zip alignment of 0");
}

std::string_view StoredZipWriter::keep(std::string bytes) {
  return owned_.emplace_back(std::move(bytes));
}

void StoredZipWriter::append(std::string_view piece) {
  pieces_.push_back(piece);
  size_ += piece.size();
}

void StoredZipWriter::add(std::string name, std::string data) {
  add_borrowed(std::move(name), keep(std::move(data)));
}

void StoredZipWriter::add_borrowed(std::string name, std::string_view data) {
  MESHSIM_ASSERT(!finished_, "an entry added to a finished zip archive");
  Entry entry{std::move(name), zip_crc32(data), data.size(), size_};
  const bool zip64 = entry.size >= zip64_from_;
  // The data must start at a multiple of the alignment: the padding field fills the gap (its
  // own 4-byte header included).
  const uint64_t zip64_field = zip64 ? 20 : 0;
  const uint64_t before_padding = size_ + kLocalHeaderSize + entry.name.size() + zip64_field + 4;
  const uint64_t padding = (alignment_ - before_padding % alignment_) % alignment_;
  LittleEndian header;
  header.u32(kZipLocalHeader)
      .u16(kZipVersion)
      .u16(0)  // flags
      .u16(0)  // stored
      .u16(0)  // time
      .u16(0)  // date
      .u32(entry.crc)
      .u32(zip64 ? 0xffffffff : entry.size)
      .u32(zip64 ? 0xffffffff : entry.size)
      .u16(entry.name.size())
      .u16(zip64_field + 4 + padding)
      .text(entry.name);
  if (zip64) header.u16(kZip64ExtraField).u16(16).u64(entry.size).u64(entry.size);
  header.u16(kPaddingExtra).u16(padding).text(std::string(padding, 'Z'));
  append(keep(header.take()));
  append(data);
  entries_.push_back(std::move(entry));
}

void StoredZipWriter::finish() {
  MESHSIM_ASSERT(!finished_, "a zip archive finished twice");
  finished_ = true;
  const uint64_t directory_offset = size_;
  LittleEndian directory;
  for (const Entry& e : entries_) {
    const bool big_size = e.size >= zip64_from_;
    const bool far = e.header_offset >= zip64_from_;
    const uint64_t extra = (big_size || far) ? 4 + (big_size ? 16 : 0) + (far ? 8 : 0) : 0;
    directory.u32(kZipDirectoryEntry)
        .u16(kZipVersion)  // made by
        .u16(kZipVersion)  // needed
        .u16(0)
        .u16(0)
        .u16(0)
        .u16(0)
        .u32(e.crc)
        .u32(big_size ? 0xffffffff : e.size)
        .u32(big_size ? 0xffffffff : e.size)
        .u16(e.name.size())
        .u16(extra)
        .u16(0)  // comment
        .u16(0)  // disk
        .u16(0)  // internal attributes
        .u32(0)  // external attributes
        .u32(far ? 0xffffffff : e.header_offset)
        .text(e.name);
    if (extra != 0) {
      directory.u16(kZip64ExtraField).u16(extra - 4);
      if (big_size) directory.u64(e.size).u64(e.size);
      if (far) directory.u64(e.header_offset);
    }
  }
  append(keep(directory.take()));
  const uint64_t directory_size = size_ - directory_offset;
  const uint64_t zip64_end = size_;
  const uint64_t count = entries_.size();
  LittleEndian end;
  end.u32(kZip64EndOfDirectory)
      .u64(44)  // the record's size after this field
      .u16(kZipVersion)
      .u16(kZipVersion)
      .u32(0)
      .u32(0)
      .u64(count)
      .u64(count)
      .u64(directory_size)
      .u64(directory_offset);
  end.u32(kZip64Locator).u32(0).u64(zip64_end).u32(1);
  const bool zip64 =
      count >= 0xffff || directory_size >= zip64_from_ || directory_offset >= zip64_from_;
  end.u32(kZipEndOfDirectory)
      .u16(0)
      .u16(0)
      .u16(zip64 ? 0xffff : count)
      .u16(zip64 ? 0xffff : count)
      .u32(zip64 ? 0xffffffff : directory_size)
      .u32(zip64 ? 0xffffffff : directory_offset)
      .u16(0);
  append(keep(end.take()));
}

StoredZipWriter torch_save_tensor(const Tensor& tensor) {
  const std::string_view storage_class = torch_storage_class(tensor.dtype());
  MESHSIM_ASSERT(!storage_class.empty(), "a dtype torch.save has no storage class for");
  // torch._utils._rebuild_tensor_v2(persistent storage id, storage offset, size, stride,
  // requires_grad, backward hooks): what torch.save pickles for a plain CPU tensor.
  PickleWriter pickle;
  pickle.global("torch._utils", "_rebuild_tensor_v2");
  pickle.mark();
  pickle.mark();
  pickle.string("storage");
  pickle.global("torch", storage_class);
  pickle.string("0");  // the storage's key: archive/data/0
  pickle.string("cpu");
  pickle.integer(tensor.numel());
  pickle.tuple_from_mark();
  pickle.persistent_id();
  pickle.integer(0);
  pickle.int_tuple(tensor.shape());
  pickle.int_tuple(torch_contiguous_strides(tensor.shape()));
  pickle.boolean(false);
  pickle.global("collections", "OrderedDict");
  pickle.empty_tuple();
  pickle.reduce();
  pickle.tuple_from_mark();
  pickle.reduce();

  const std::span<const std::byte> bytes = tensor.bytes();
  const uint64_t digest = tensor_digest(tensor);
  StoredZipWriter zip;
  zip.add("archive/data.pkl", pickle.finish());
  zip.add("archive/.format_version", "1");
  zip.add("archive/.storage_alignment", "64");
  zip.add("archive/byteorder", "little");
  zip.add_borrowed("archive/data/0",
                   std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  zip.add("archive/version", "3\n");
  // 40 decimal digits, as PyTorch writes them.
  zip.add("archive/.data/serialization_id",
          fmt::format("{:020}{:020}", digest, digest ^ 0x9e3779b97f4a7c15ull));
  zip.finish();
  return zip;
}

}  // namespace meshsim
