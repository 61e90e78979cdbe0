#include "src/io/torch_save_archive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "src/checked_math.hpp"
#include "src/error.hpp"
#include "src/io/pickle_reader.hpp"
#include "src/io/torch_storage_classes.hpp"
#include "src/io/zip_format.hpp"

namespace meshsim {
namespace {

using Kind = PickleValue::Kind;

constexpr size_t kEndOfDirectorySize = 22;
constexpr size_t kMaxNameBytes = 4096;

// Little-endian fields at checked offsets of one archive.
class Bytes {
 public:
  Bytes(std::string_view bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  [[noreturn]] void fail(uint64_t at, std::string_view message) const {
    throw value_error(fmt::format("{}: byte {}: {}", what_, at, message));
  }
  void need(uint64_t at, uint64_t count, std::string_view field) const {
    if (at > bytes_.size() || count > bytes_.size() - at) {
      fail(at, fmt::format("{} runs past the end of the archive ({} bytes)", field, bytes_.size()));
    }
  }
  uint64_t le(uint64_t at, int width, std::string_view field) const {
    need(at, static_cast<uint64_t>(width), field);
    uint64_t out = 0;
    for (int i = width - 1; i >= 0; --i) out = (out << 8) | static_cast<uint8_t>(bytes_[at + i]);
    return out;
  }
  std::string_view slice(uint64_t at, uint64_t count, std::string_view field) const {
    need(at, count, field);
    return bytes_.substr(at, count);
  }
  size_t size() const { return bytes_.size(); }

 private:
  std::string_view bytes_;
  std::string_view what_;
};

struct Directory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

Directory find_directory(const Bytes& in) {
  if (in.size() < kEndOfDirectorySize) {
    in.fail(0, "too short to be a zip archive (no end-of-directory record)");
  }
  // The end record sits at the end, after a comment of at most 65,535 bytes.
  const uint64_t lowest =
      in.size() > kEndOfDirectorySize + 0xffff ? in.size() - kEndOfDirectorySize - 0xffff : 0;
  std::optional<uint64_t> end;
  for (uint64_t at = in.size() - kEndOfDirectorySize + 1; at-- > lowest;) {
    if (in.le(at, 4, "the end-of-directory signature") == kZipEndOfDirectory &&
        at + kEndOfDirectorySize + in.le(at + 20, 2, "the comment length") == in.size()) {
      end = at;
      break;
    }
  }
  if (!end) in.fail(in.size(), "no zip end-of-directory record: not a zip archive");
  if (in.le(*end + 4, 2, "the disk number") != 0 || in.le(*end + 6, 2, "the directory disk") != 0) {
    in.fail(*end, "a multi-disk archive");
  }
  Directory out{in.le(*end + 10, 2, "the entry count"), in.le(*end + 16, 4, "the directory offset"),
                in.le(*end + 12, 4, "the directory size")};
  const bool zip64 = out.entries == 0xffff || out.offset == 0xffffffff || out.size == 0xffffffff;
  if (*end >= 20 && in.le(*end - 20, 4, "the zip64 locator") == kZip64Locator) {
    const uint64_t record = in.le(*end - 12, 8, "the zip64 end-of-directory offset");
    if (in.le(record, 4, "the zip64 end-of-directory record") != kZip64EndOfDirectory) {
      in.fail(record, "the zip64 locator points at no zip64 end-of-directory record");
    }
    out.entries = in.le(record + 32, 8, "the zip64 entry count");
    out.size = in.le(record + 40, 8, "the zip64 directory size");
    out.offset = in.le(record + 48, 8, "the zip64 directory offset");
  } else if (zip64) {
    in.fail(*end, "the archive needs zip64 records and has none");
  }
  in.need(out.offset, out.size, "the central directory");
  return out;
}

// Sizes and offset of an entry: from its directory record, or its zip64 extra field where the
// record says 0xffffffff.
struct EntryPlace {
  uint64_t size = 0;
  uint64_t compressed = 0;
  uint64_t local = 0;
};

EntryPlace entry_place(const Bytes& in, uint64_t record, uint64_t extra, uint64_t extra_size) {
  EntryPlace out{in.le(record + 24, 4, "the size"), in.le(record + 20, 4, "the compressed size"),
                 in.le(record + 42, 4, "the local header offset")};
  uint64_t* wide[] = {&out.size, &out.compressed, &out.local};
  for (uint64_t at = extra; at + 4 <= extra + extra_size;) {
    const uint64_t id = in.le(at, 2, "an extra field id");
    const uint64_t length = in.le(at + 2, 2, "an extra field length");
    in.need(at + 4, length, "an extra field");
    if (id == kZip64ExtraField) {
      uint64_t field = at + 4;
      for (uint64_t* value : wide) {
        if (*value != 0xffffffff) continue;
        if (field + 8 > at + 4 + length) in.fail(at, "a zip64 extra field too short for its sizes");
        *value = in.le(field, 8, "a zip64 size");
        field += 8;
      }
    }
    at += 4 + length;
  }
  return out;
}

}  // namespace

std::vector<ZipEntry> read_stored_zip(std::string_view archive, std::string_view what,
                                      ZipChecksums checksums) {
  const Bytes in(archive, what);
  const Directory directory = find_directory(in);
  // A record is at least 46 bytes: a count past that is a lie, refused before anything is sized.
  if (directory.entries > directory.size / 46) {
    in.fail(directory.offset, fmt::format("{} entries cannot fit a central directory of {} bytes",
                                          directory.entries, directory.size));
  }
  // Every entry placed first, then duplicates and overlaps refused, and only then checksums
  // computed: a directory of many records pointing at one large entry costs a sort, not a CRC
  // pass per record.
  struct Placed {
    ZipEntry entry;
    uint64_t record = 0;
    uint64_t local = 0;
    uint64_t data = 0;
    uint64_t crc = 0;
  };
  std::vector<Placed> placed;
  uint64_t record = directory.offset;
  for (uint64_t i = 0; i < directory.entries; ++i) {
    if (in.le(record, 4, "a directory record") != kZipDirectoryEntry) {
      in.fail(record, "not a central directory record");
    }
    const uint64_t flags = in.le(record + 8, 2, "the flags");
    const uint64_t method = in.le(record + 10, 2, "the method");
    const uint64_t name_size = in.le(record + 28, 2, "the name length");
    const uint64_t extra_size = in.le(record + 30, 2, "the extra length");
    const uint64_t comment_size = in.le(record + 32, 2, "the comment length");
    if (name_size > kMaxNameBytes) in.fail(record, "an entry name longer than 4096 bytes");
    std::string name(in.slice(record + 46, name_size, "the entry name"));
    if ((flags & 0x1) != 0) in.fail(record, fmt::format("entry '{}' is encrypted", name));
    if (method != 0) {
      in.fail(record, fmt::format("entry '{}' is compressed (method {}); torch.save stores entries",
                                  name, method));
    }
    const EntryPlace place = entry_place(in, record, record + 46 + name_size, extra_size);
    if (place.compressed != place.size) {
      in.fail(record, fmt::format("entry '{}' is stored with two different sizes", name));
    }
    if (in.le(place.local, 4, "a local header") != kZipLocalHeader) {
      in.fail(place.local, fmt::format("entry '{}' points at no local header", name));
    }
    const uint64_t data = place.local + 30 + in.le(place.local + 26, 2, "the local name length") +
                          in.le(place.local + 28, 2, "the local extra length");
    const std::string_view bytes = in.slice(data, place.size, fmt::format("entry '{}'", name));
    placed.push_back(
        {{std::move(name), bytes}, record, place.local, data, in.le(record + 16, 4, "the CRC-32")});
    record += 46 + name_size + extra_size + comment_size;
  }
  std::vector<size_t> order(placed.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return placed[a].entry.name < placed[b].entry.name; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (placed[order[i]].entry.name == placed[order[i - 1]].entry.name) {
      in.fail(placed[order[i]].record,
              fmt::format("entry '{}' is listed twice", placed[order[i]].entry.name));
    }
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return placed[a].local < placed[b].local; });
  for (size_t i = 1; i < order.size(); ++i) {
    const Placed& before = placed[order[i - 1]];
    if (placed[order[i]].local < before.data + before.entry.data.size()) {
      in.fail(placed[order[i]].local, "two entries overlap");
    }
  }
  std::vector<ZipEntry> out;
  for (Placed& p : placed) {
    if (checksums == ZipChecksums::kVerify && zip_crc32(p.entry.data) != p.crc) {
      in.fail(p.data, fmt::format("entry '{}' does not match its CRC-32", p.entry.name));
    }
    out.push_back(std::move(p.entry));
  }
  return out;
}

namespace {

const ZipEntry* find_entry(const std::vector<ZipEntry>& entries, std::string_view suffix,
                           std::string_view prefix) {
  for (const ZipEntry& entry : entries) {
    if (entry.name.size() == prefix.size() + suffix.size() && entry.name.starts_with(prefix) &&
        entry.name.ends_with(suffix)) {
      return &entry;
    }
  }
  return nullptr;
}

// Copies `shape` elements of `size` bytes at `strides` (in elements) from `storage`, row-major.
void gather(std::string_view storage, int64_t offset, const std::vector<int64_t>& shape,
            const std::vector<int64_t>& strides, size_t size, std::byte* out) {
  const int64_t numel = *checked_product(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t at = offset;
    for (size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
    std::memcpy(out + static_cast<size_t>(n) * size,
                storage.data() + static_cast<size_t>(at) * size, size);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

std::vector<PickleGlobalName> torch_tensor_globals() {
  std::vector<PickleGlobalName> out = {{"torch._utils", "_rebuild_tensor_v2"},
                                       {"collections", "OrderedDict"}};
  for (const TorchStorageClass& storage : kTorchStorageClasses)
    out.push_back({"torch", storage.name});
  return out;
}

Error TorchSaveArchive::fail(std::string_view message) const {
  return value_error(fmt::format("{}: {}", pickle_what, message));
}

TorchSaveArchive open_torch_save(std::string_view archive, std::string_view what,
                                 std::span<const PickleGlobalName> allowed,
                                 ZipChecksums checksums) {
  TorchSaveArchive out;
  out.entries = read_stored_zip(archive, what, checksums);
  const auto data_pkl = std::find_if(out.entries.begin(), out.entries.end(), [](const ZipEntry& e) {
    return e.name.ends_with("/data.pkl") && e.name.find('/') == e.name.size() - 9;
  });
  if (data_pkl == out.entries.end()) {
    throw value_error(fmt::format("{}: not a torch.save archive (no <name>/data.pkl)", what));
  }
  out.prefix = data_pkl->name.substr(0, data_pkl->name.size() - 8);
  if (const ZipEntry* order = find_entry(out.entries, "byteorder", out.prefix);
      order != nullptr && order->data != "little") {
    throw value_error(fmt::format("{}: a {}-endian archive; meshsim reads little-endian ones", what,
                                  order->data));
  }
  out.pickle_what = fmt::format("{}: {}", what, data_pkl->name);
  out.document = read_pickle(std::string(data_pkl->data), allowed, out.pickle_what);
  return out;
}

Tensor torch_saved_tensor_at(const TorchSaveArchive& archive, uint32_t index) {
  const PickleDocument& document = archive.document;
  const auto fail = [&](std::string_view message) { return archive.fail(message); };
  const auto at = [&](uint32_t i) -> const PickleValue& { return document.at(i); };
  const PickleValue& root = at(index);
  if (root.kind != Kind::kObject ||
      !is_pickle_global(document, root.items[0], "torch._utils", "_rebuild_tensor_v2") ||
      at(root.items[1]).items.size() < 4) {
    throw fail(fmt::format("expected a tensor (torch._utils._rebuild_tensor_v2), found {}",
                           describe_pickle_value(document, index, 1, 80)));
  }
  const PickleItems& args = at(root.items[1]).items;
  // (('storage', torch.XStorage, key, location, numel), storage_offset, size, stride, ...)
  const PickleValue& id = at(args[0]);
  if (id.kind != Kind::kPersistentId || at(id.items[0]).kind != Kind::kTuple ||
      at(id.items[0]).items.size() != 5) {
    throw fail("the tensor's storage is not a ('storage', class, key, location, numel) id");
  }
  const PickleItems& storage_id = at(id.items[0]).items;
  const PickleValue& storage_class = at(storage_id[1]);
  const PickleValue& key = at(storage_id[2]);
  const PickleValue& storage_numel = at(storage_id[4]);
  if (storage_class.kind != Kind::kGlobal || key.kind != Kind::kString ||
      storage_numel.kind != Kind::kInt || storage_numel.integer < 0) {
    throw fail("the storage id's class, key or element count is malformed");
  }
  const std::string_view class_name = at(storage_class.items[1]).text;
  const auto known = std::find_if(std::begin(kTorchStorageClasses), std::end(kTorchStorageClasses),
                                  [&](const TorchStorageClass& s) { return s.name == class_name; });
  if (known == std::end(kTorchStorageClasses) || !known->dtype) {
    throw fail(fmt::format("torch.{} holds a dtype meshsim does not have", class_name));
  }
  const DType dtype = *known->dtype;
  const ZipEntry* storage = find_entry(archive.entries, key.text, archive.prefix + "data/");
  if (storage == nullptr) {
    throw fail(
        fmt::format("its storage '{}data/{}' is not in the archive", archive.prefix, key.text));
  }
  const uint64_t element = dtype_size(dtype);
  if (storage->data.size() / element < static_cast<uint64_t>(storage_numel.integer) ||
      storage->data.size() % element != 0) {
    throw fail(fmt::format("storage '{}' has {} bytes, not {} elements of {}", key.text,
                           storage->data.size(), storage_numel.integer, dtype_name(dtype)));
  }
  const auto ints = [&](uint32_t tuple, std::string_view field) {
    const PickleValue& value = at(tuple);
    if (value.kind != Kind::kTuple) throw fail(fmt::format("its {} is not a tuple", field));
    std::vector<int64_t> out;
    for (uint32_t item : value.items) {
      if (at(item).kind != Kind::kInt || at(item).integer < 0) {
        throw fail(fmt::format("its {} holds {}, not a non-negative integer", field,
                               describe_pickle_value(document, item, 1, 40)));
      }
      out.push_back(at(item).integer);
    }
    return out;
  };
  if (at(args[1]).kind != Kind::kInt || at(args[1]).integer < 0) {
    throw fail("its storage offset is not a non-negative integer");
  }
  const int64_t offset = at(args[1]).integer;
  const std::vector<int64_t> shape = ints(args[2], "size");
  const std::vector<int64_t> strides = ints(args[3], "stride");
  if (strides.size() != shape.size() || shape.size() > Tensor::kMaxDims) {
    throw fail(fmt::format("a size of {} dims with a stride of {}", shape.size(), strides.size()));
  }
  // The last element the view reaches must lie in the storage, and the view may not hold more
  // elements than the storage (an expanded view: DCP saves a compact clone instead), so a small
  // archive never makes a large tensor.
  const std::optional<int64_t> numel = checked_product(shape);
  if (!numel) throw fail("its size overflows");
  if (*numel > storage_numel.integer) {
    throw fail(fmt::format("its view holds {} elements of a storage of {}", *numel,
                           storage_numel.integer));
  }
  if (*numel > 0) {
    int64_t last = offset;
    for (size_t d = 0; d < shape.size(); ++d) {
      const auto step = checked_mul(shape[d] - 1, strides[d]);
      const auto sum = step ? checked_add(last, *step) : std::nullopt;
      if (!sum) throw fail("its view overflows");
      last = *sum;
    }
    if (last >= storage_numel.integer) {
      throw fail(fmt::format("its view reaches element {} of a storage of {}", last,
                             storage_numel.integer));
    }
  }
  Tensor out(shape, dtype);
  gather(storage->data, offset, shape, strides, element, out.mutable_bytes().data());
  return out;
}

Tensor read_torch_saved_tensor(std::string_view archive, std::string_view what,
                               ZipChecksums checksums) {
  static const std::vector<PickleGlobalName> allowed = torch_tensor_globals();
  const TorchSaveArchive opened = open_torch_save(archive, what, allowed, checksums);
  return torch_saved_tensor_at(opened, opened.document.root);
}

}  // namespace meshsim
