#include "src/io/fr_dump.hpp"

#include <charconv>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/error.hpp"
#include "src/io/pickle_reader.hpp"
#include "src/printable.hpp"
#include "src/tensor/memory_budget.hpp"
#include "src/tensor/tensor.hpp"

namespace meshsim {

namespace {

using nlohmann::json;

// A decoded tree costs at most this many bytes per input byte (nlohmann's nodes are 16 bytes,
// strings and maps more): what is reserved against the memory budget before decoding.
constexpr uint64_t kTreeBytesPerInputByte = 24;

// The pickle's graph as a JSON tree (a dump holds only dicts, lists, tuples, strings, numbers,
// bools and None). Walked with an explicit stack, never recursion; shared or cyclic references
// are copied, so the nesting and the number of nodes made are bounded.
json pickle_to_json(const PickleDocument& doc, std::string_view what, const FrDumpLimits& limits) {
  json root;
  struct Work {
    uint32_t value;
    json* into;
    size_t depth;
  };
  std::vector<Work> stack{{doc.root, &root, 0}};
  const uint64_t max_nodes = doc.bytes->size() * 2 + 1024;
  uint64_t nodes = 0;
  while (!stack.empty()) {
    const Work w = stack.back();
    stack.pop_back();
    const PickleValue& v = doc.at(w.value);
    const auto refuse = [&](std::string_view why) {
      throw value_error(fmt::format("{}: byte {}: {}", what, v.offset, why));
    };
    if (++nodes > max_nodes)
      refuse("the pickle refers to its values more often than a dump of its size can");
    if (w.depth > limits.max_depth)
      refuse(fmt::format("containers nested deeper than {}", limits.max_depth));
    switch (v.kind) {
      case PickleValue::Kind::kNone:
        *w.into = nullptr;
        break;
      case PickleValue::Kind::kBool:
        *w.into = v.integer != 0;
        break;
      case PickleValue::Kind::kInt:
        *w.into = v.integer;
        break;
      case PickleValue::Kind::kFloat:
        *w.into = v.real;
        break;
      case PickleValue::Kind::kString:
        *w.into = std::string(v.text);
        break;
      case PickleValue::Kind::kTuple:
      case PickleValue::Kind::kList: {
        *w.into = json::array();
        auto& items = w.into->get_ref<json::array_t&>();
        items.resize(v.items.size());  // sized once: the children's places stay put
        for (size_t i = 0; i < v.items.size(); ++i)
          stack.push_back({v.items[i], &items[i], w.depth + 1});
        break;
      }
      case PickleValue::Kind::kDict: {
        *w.into = json::object();
        for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
          const PickleValue& key = doc.at(v.items[i]);
          if (key.kind != PickleValue::Kind::kString)
            refuse("a dict key that is not a string (a dump's keys all are)");
          json& slot = (*w.into)[std::string(key.text)];  // a std::map node: stays put
          stack.push_back({v.items[i + 1], &slot, w.depth + 1});
        }
        break;
      }
      default:
        refuse(fmt::format("{} has no place in a Flight Recorder dump",
                           describe_pickle_value(doc, w.value, 1, 60)));
    }
  }
  return root;
}

json parse_json(const std::string& bytes, std::string_view what, const FrDumpLimits& limits) {
  const auto depth_check = [&](int depth, json::parse_event_t, json&) {
    if (static_cast<size_t>(depth) > limits.max_depth) {
      throw value_error(
          fmt::format("{}: containers nested deeper than {}", what, limits.max_depth));
    }
    return true;
  };
  try {
    return json::parse(bytes, depth_check);
  } catch (const json::exception& e) {
    // nlohmann's text is "[json.exception.parse_error.101] parse error at line 1, column 5: ...";
    // a number too large for a double is its out_of_range.406.
    std::string text = e.what();
    if (const size_t at = text.find("] "); at != std::string::npos) text = text.substr(at + 2);
    throw value_error(
        fmt::format("{}: not a Flight Recorder dump: {}", what, printable(text, 200)));
  }
}

// A field of the tree, named by its path for messages ("entries[3].input_sizes[0]").
class Field {
 public:
  Field(const json& value, std::string path, std::string_view what)
      : value_(value), path_(std::move(path)), what_(what) {}

  [[noreturn]] void fail(std::string_view expected) const {
    throw value_error(
        fmt::format("{}: {}: expected {}, found {}", what_, path_, expected, value_.type_name()));
  }
  const json& value() const { return value_; }
  bool is_null() const { return value_.is_null(); }

  // A key of this dict; absent keys are refused unless optional.
  Field at(std::string_view key) const {
    if (!value_.is_object()) fail("a dict");
    const auto it = value_.find(key);
    if (it == value_.end()) {
      throw value_error(
          fmt::format("{}: {}: the key '{}' is missing", what_, path_, printable(key)));
    }
    return Field(*it, fmt::format("{}.{}", path_, key), what_);
  }
  std::optional<Field> maybe(std::string_view key) const {
    if (!value_.is_object()) fail("a dict");
    const auto it = value_.find(key);
    if (it == value_.end()) return std::nullopt;
    return Field(*it, fmt::format("{}.{}", path_, key), what_);
  }
  std::vector<Field> items() const {
    if (!value_.is_array()) fail("a list");
    std::vector<Field> out;
    for (size_t i = 0; i < value_.size(); ++i)
      out.emplace_back(value_[i], fmt::format("{}[{}]", path_, i), what_);
    return out;
  }
  std::vector<std::pair<std::string, Field>> members() const {
    if (!value_.is_object()) fail("a dict");
    std::vector<std::pair<std::string, Field>> out;
    for (const auto& [key, v] : value_.items())
      out.emplace_back(key, Field(v, fmt::format("{}.{}", path_, printable(key)), what_));
    return out;
  }
  std::string text() const {
    if (!value_.is_string()) fail("a string");
    return value_.get<std::string>();
  }
  int64_t integer() const {
    if (!value_.is_number_integer()) fail("an integer");
    if (value_.is_number_unsigned() && value_.get<uint64_t>() > uint64_t{INT64_MAX})
      fail("an integer below 2^63");
    return value_.get<int64_t>();
  }
  // An integer, or one written as decimal text (JSON dumps give pg_status's counters so).
  int64_t integer_or_text() const {
    if (!value_.is_string()) return integer();
    const std::string& s = value_.get_ref<const std::string&>();
    int64_t out = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) fail("a decimal integer");
    return out;
  }
  bool boolean() const {
    if (!value_.is_boolean()) fail("a bool");
    return value_.get<bool>();
  }
  // A time in nanoseconds: None (pickle) or 0 (JSON) when the recorder never saw it.
  std::optional<int64_t> time() const {
    if (is_null()) return std::nullopt;
    const int64_t t = integer();
    return t == 0 ? std::nullopt : std::optional<int64_t>(t);
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> out;
    for (const Field& f : items()) out.push_back(f.text());
    return out;
  }
  std::vector<std::vector<int64_t>> shapes() const {
    std::vector<std::vector<int64_t>> out;
    for (const Field& shape : items()) {
      std::vector<int64_t> dims;
      for (const Field& d : shape.items()) dims.push_back(d.integer());
      out.push_back(std::move(dims));
    }
    return out;
  }

 private:
  const json& value_;
  std::string path_;
  std::string_view what_;
};

// "[0, 1, 2, 3]", as pg_config gives a group's ranks (or a list, should a later version).
std::vector<int64_t> group_ranks(const Field& f) {
  if (f.value().is_array()) {
    std::vector<int64_t> out;
    for (const Field& r : f.items()) {
      out.push_back(r.integer());
      if (out.back() < 0) r.fail("a rank (0 or more)");
    }
    return out;
  }
  const std::string s = f.text();
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') f.fail("a list of ranks as \"[0, 1]\"");
  std::vector<int64_t> out;
  size_t at = 1;
  const size_t end = s.size() - 1;
  while (at < end) {
    while (at < end && s[at] == ' ') ++at;
    int64_t r = 0;
    const auto [next, ec] = std::from_chars(s.data() + at, s.data() + end, r);
    if (ec != std::errc() || r < 0) f.fail("a list of ranks as \"[0, 1]\"");
    out.push_back(r);
    at = static_cast<size_t>(next - s.data());
    while (at < end && s[at] == ' ') ++at;
    if (at < end && s[at++] != ',') f.fail("a list of ranks as \"[0, 1]\"");
  }
  return out;
}

std::vector<FrFrame> frames_of(const Field& f) {
  std::vector<FrFrame> out;
  for (const Field& frame : f.items())
    out.push_back(
        {frame.at("name").text(), frame.at("filename").text(), frame.at("line").integer()});
  return out;
}

FrEntry decode_entry(const Field& e) {
  FrEntry out;
  out.record_id = e.at("record_id").integer();
  out.pg_id = e.at("pg_id").integer();
  const std::vector<Field> pg = e.at("process_group").items();
  if (pg.size() != 2) e.at("process_group").fail("(name, description)");
  out.pg_name = pg[0].text();
  out.pg_desc = pg[1].text();
  out.collective_seq_id = e.at("collective_seq_id").integer();
  out.p2p_seq_id = e.at("p2p_seq_id").integer();
  out.op_id = e.at("op_id").integer();
  out.profiling_name = e.at("profiling_name").text();
  out.input_sizes = e.at("input_sizes").shapes();
  out.output_sizes = e.at("output_sizes").shapes();
  out.input_dtypes = e.at("input_dtypes").strings();
  out.output_dtypes = e.at("output_dtypes").strings();
  const Field state = e.at("state");
  out.state = state.text();
  if (out.state != "scheduled" && out.state != "started" && out.state != "completed")
    state.fail("scheduled, started or completed");
  out.retired = e.at("retired").boolean();
  out.is_p2p = e.at("is_p2p").boolean();
  out.timeout_ms = e.at("timeout_ms").integer();
  out.time_created_ns = e.at("time_created_ns").time();
  out.time_started_ns = e.at("time_discovered_started_ns").time();
  out.time_completed_ns = e.at("time_discovered_completed_ns").time();
  if (const auto frames = e.maybe("frames")) out.frames = frames_of(*frames);
  if (const auto name = e.maybe("thread_name")) out.thread_name = name->text();
  if (const auto id = e.maybe("thread_id")) out.thread_id = id->text();
  return out;
}

// Mesh shapes, tensor shapes and placement lists past this many dims are refused.
constexpr size_t kMaxRngDims = 64;

std::vector<int64_t> counts(const Field& f, size_t max_size, std::string_view expected) {
  const std::vector<Field> items = f.items();
  if (items.size() > max_size) f.fail(expected);
  std::vector<int64_t> out;
  for (const Field& item : items) {
    out.push_back(item.integer());
    if (out.back() < 0) item.fail(expected);
  }
  return out;
}

FrRngCall decode_rng_call(const Field& c) {
  FrRngCall out;
  const Field call = c.at("call");
  const std::string kind = call.text();
  if (kind == "torch_manual_seed") {
    out.kind = FrRngCall::Kind::kTorchManualSeed;
  } else if (kind == "manual_seed") {
    out.kind = FrRngCall::Kind::kManualSeed;
  } else if (kind == "random_op") {
    out.kind = FrRngCall::Kind::kRandomOp;
  } else {
    call.fail("torch_manual_seed, manual_seed or random_op");
  }
  if (out.kind != FrRngCall::Kind::kRandomOp) {
    // torch.manual_seed takes any integer that fits in 64 bits, negative ones as their bits.
    const Field seed = c.at("seed");
    if (!seed.value().is_number_integer()) seed.fail("an integer");
    out.seed = seed.value().is_number_unsigned() ? seed.value().get<uint64_t>()
                                                 : static_cast<uint64_t>(seed.integer());
  }
  if (const auto frames = c.maybe("frames")) out.frames = frames_of(*frames);
  if (out.kind == FrRngCall::Kind::kTorchManualSeed) return out;
  const Field shape = c.at("mesh_shape");
  out.mesh_shape = counts(shape, kMaxRngDims, "a mesh shape (sizes of 0 or more)");
  const Field ranks = c.at("mesh_ranks");
  out.mesh_ranks = counts(ranks, static_cast<size_t>(kMaxFrRngMesh), "a mesh's ranks");
  int64_t size = 1;
  for (const int64_t d : out.mesh_shape) {
    if (d > 0 && size > kMaxFrRngMesh / d) shape.fail("a mesh shape of fewer ranks");
    size *= d;
  }
  if (size != static_cast<int64_t>(out.mesh_ranks.size()))
    ranks.fail(fmt::format("{} ranks, as the mesh's shape gives", size));
  if (const Field coordinate = c.at("coordinate"); !coordinate.is_null()) {
    out.coordinate = counts(coordinate, kMaxRngDims, "a coordinate in the mesh");
    if (out.coordinate->size() != out.mesh_shape.size())
      coordinate.fail("a coordinate in the mesh");
    for (size_t i = 0; i < out.coordinate->size(); ++i)
      if ((*out.coordinate)[i] >= out.mesh_shape[i]) coordinate.fail("a coordinate in the mesh");
  }
  if (out.kind == FrRngCall::Kind::kManualSeed) return out;
  out.op = c.at("op").text();
  if (const auto overload = c.maybe("overload")) out.overload = overload->text();
  if (const auto arguments = c.maybe("arguments")) {
    for (const auto& [name, value] : arguments->members()) {
      if (value.value().is_number())
        out.arguments.emplace_back(name, value.value().get<double>());
      else if (value.value().is_boolean())
        out.arguments.emplace_back(name, value.boolean() ? 1.0 : 0.0);
      else
        value.fail("a number");
    }
  }
  if (const auto parameter = c.maybe("parameter"); parameter && !parameter->is_null())
    out.parameter = parameter->text();
  if (const auto generator = c.maybe("user_generator")) out.user_generator = generator->boolean();
  if (const auto factory = c.maybe("factory")) out.factory = factory->boolean();
  const Field placements = c.at("placements");
  out.placements = placements.strings();
  if (out.placements.size() != out.mesh_shape.size())
    placements.fail(fmt::format("one placement per mesh dim ({})", out.mesh_shape.size()));
  const Field tensor_shape = c.at("shape");
  out.shape = counts(tensor_shape, Tensor::kMaxDims, "a tensor shape (sizes of 0 or more)");
  int64_t numel = 1;
  for (const int64_t d : out.shape)
    if (__builtin_mul_overflow(numel, d, &numel)) tensor_shape.fail("a shape of fewer elements");
  out.dtype = c.at("dtype").text();
  const Field local = c.at("local_numel");
  out.local_numel = local.integer();
  if (out.local_numel < 0 || out.local_numel > numel)
    local.fail("the element count of a shard (0 to the tensor's)");
  out.meta = c.at("meta").boolean();
  out.region = c.at("region").boolean();
  out.tracker_created = c.at("tracker_created").boolean();
  return out;
}

FrDump decode(const json& tree, std::string_view what, const FrDumpLimits& limits) {
  const Field root(tree, "dump", what);
  FrDump out;
  out.version = root.at("version").text();
  if (out.version.rfind("2.", 0) != 0) {
    throw value_error(
        fmt::format("{}: a Flight Recorder dump of schema version {}, where meshsim reads 2.x",
                    what, printable(out.version)));
  }
  if (const auto lib = root.maybe("comm_lib_version")) out.comm_lib_version = lib->text();
  if (const auto config = root.maybe("pg_config")) {
    for (const auto& [key, g] : config->members()) {
      out.pg_config[key] = {g.at("name").text(), g.at("desc").text(), group_ranks(g.at("ranks"))};
    }
  }
  if (const auto status = root.maybe("pg_status")) {
    for (const auto& [key, s] : status->members()) {
      out.pg_status[key] = {s.at("last_enqueued_collective").integer_or_text(),
                            s.at("last_started_collective").integer_or_text(),
                            s.at("last_completed_collective").integer_or_text()};
    }
  }
  if (const auto rec = root.maybe("meshsim_record")) {
    FrRecorded r;
    const auto text_of = [](const std::optional<Field>& f) { return f ? f->text() : ""; };
    r.torch_version = text_of(rec->maybe("torch_version"));
    r.command = text_of(rec->maybe("command"));
    if (const auto outcome = rec->maybe("outcome")) {
      r.status = outcome->at("status").text();
      r.error = text_of(outcome->maybe("error"));
      if (const auto at = outcome->maybe("at"); at && !at->is_null()) r.at = at->text();
    }
    if (const auto rng = rec->maybe("rng")) {
      const std::vector<Field> calls = rng->items();
      if (calls.size() > limits.max_entries) {
        throw value_error(fmt::format("{}: {} RNG calls, more than the {} meshsim reads", what,
                                      calls.size(), limits.max_entries));
      }
      for (const Field& c : calls) r.rng.push_back(decode_rng_call(c));
    }
    out.recorded = std::move(r);
  }
  const auto entries = root.maybe("entries");
  if (!entries) return out;  // a dump taken without collectives
  const std::vector<Field> items = entries->items();
  if (items.size() > limits.max_entries) {
    throw value_error(fmt::format("{}: {} entries, more than the {} meshsim reads", what,
                                  items.size(), limits.max_entries));
  }
  for (const Field& e : items) out.entries.push_back(decode_entry(e));
  return out;
}

}  // namespace

FrDump read_fr_dump(std::string bytes, std::string_view what, FrDumpLimits limits) {
  if (bytes.size() > limits.max_bytes) {
    throw value_error(fmt::format("{}: {} bytes, more than the {} a dump may have", what,
                                  bytes.size(), limits.max_bytes));
  }
  const MemoryReservation tree_memory(bytes.size() * kTreeBytesPerInputByte,
                                      fmt::format("decoding {}", what));
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
    const PickleDocument doc = read_pickle(std::move(bytes), {}, what);
    return decode(pickle_to_json(doc, what, limits), what, limits);
  }
  if (bytes.empty() || bytes[0] != '{') {
    throw value_error(fmt::format(
        "{}: not a Flight Recorder dump (neither a pickle, which starts with byte 0x80, nor "
        "JSON, which starts with '{{')",
        what));
  }
  return decode(parse_json(bytes, what, limits), what, limits);
}

}  // namespace meshsim
