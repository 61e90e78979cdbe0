#include "sim/swarm/swarm_json.hpp"

#include <charconv>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/base/source_location.hpp"

namespace meshsim::sim {

namespace {

using Json = nlohmann::json;
using Ordered = nlohmann::ordered_json;

constexpr int kSchema = 1;
// A shard file nests four containers deep; anything deeper is not one.
constexpr int kMaxDepth = 8;
constexpr size_t kMaxFiles = 100'000;

Ordered space_json(const SwarmSpace& space) {
  Ordered files = Ordered::array();
  for (const SwarmFile& f : space.files)
    files.push_back({{"path", f.path}, {"digest", fmt::format("{:016x}", f.digest)}});
  return Ordered{{"files", std::move(files)},
                 {"schedule_seeds", space.schedule_seeds.text()},
                 {"fault_seeds", space.fault_seeds.text()},
                 {"run_flags", space.run_flags},
                 {"combinations", space.size().value_or(0)}};
}

Ordered failures_json(const SwarmSpace& space, const SwarmTally& tally) {
  Ordered out = Ordered::array();
  for (const DistinctFailure* f : tally.failures()) {
    const Combination first = space.at(f->first);
    out.push_back({{"file", space.files.at(f->file).path},
                   {"scenario", f->scenario},
                   {"signature", f->signature},
                   {"runs", f->runs},
                   {"first",
                    {{"combination", f->first},
                     {"schedule_seed", first.schedule_seed},
                     {"faults_seed", first.faults_seed ? Ordered(*first.faults_seed) : Ordered()}}},
                   {"headline", f->headline},
                   {"replay", space.replay_line(first)}});
  }
  return out;
}

Ordered results_json(const char* kind, const std::string& version, const SwarmSpace& space,
                     const SwarmTally& tally, const Shard* shard) {
  Ordered out{{"meshsim_swarm", kind},
              {"schema", kSchema},
              {"meshsim", version},
              {"space", space_json(space)}};
  if (shard != nullptr) out["shard"] = {{"index", shard->index}, {"count", shard->count}};
  out["runs"] = tally.runs();
  out["passed"] = tally.passed();
  out["failed"] = tally.failed();
  out["distinct_failures"] = tally.distinct();
  out["failures"] = failures_json(space, tally);
  return out;
}

// Reads the fields of one JSON object, naming the field of a bad one ("failures[2].runs").
class Fields {
 public:
  Fields(const Json& object, std::string path, const std::string& name)
      : object_(object), path_(std::move(path)), name_(name) {
    if (!object_.is_object()) fail("", "is not an object");
  }
  [[noreturn]] void fail(std::string_view field, const std::string& why) const {
    const std::string where = path_.empty()   ? std::string(field)
                              : field.empty() ? path_
                                              : path_ + "." + std::string(field);
    throw InputError(
        SourceLocation{name_, 0, 0},
        fmt::format("not a meshsim swarm shard: {}{}", where.empty() ? "" : where + " ", why));
  }
  const Json& at(const char* field) const {
    const auto it = object_.find(field);
    if (it == object_.end()) fail(field, "is missing");
    return *it;
  }
  std::string text(const char* field) const {
    const Json& v = at(field);
    if (!v.is_string()) fail(field, "is not a string");
    return v.get<std::string>();
  }
  uint64_t number(const char* field) const {
    const Json& v = at(field);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(field, "is not a whole number from 0 to 2^64-1");
    return v.get<uint64_t>();
  }
  std::string child(const std::string& field) const {
    return path_.empty() ? field : path_ + "." + field;
  }

 private:
  const Json& object_;
  std::string path_;
  const std::string& name_;
};

SwarmSpace read_space(const Fields& top, const std::string& name) {
  const Fields fields(top.at("space"), "space", name);
  SwarmSpace space;
  const Json& files = fields.at("files");
  if (!files.is_array() || files.size() > kMaxFiles)
    fields.fail("files", fmt::format("is not a list of at most {} files", kMaxFiles));
  for (size_t i = 0; i < files.size(); ++i) {
    const Fields file(files[i], fmt::format("space.files[{}]", i), name);
    const std::string digest = file.text("digest");
    SwarmFile f{file.text("path"), 0};
    if (digest.size() != 16 ||
        std::from_chars(digest.data(), digest.data() + 16, f.digest, 16).ptr != digest.data() + 16)
      file.fail("digest", "is not 16 hex digits");
    space.files.push_back(std::move(f));
  }
  std::string error;
  if (!(error = parse_seed_list(fields.text("schedule_seeds"), false, space.schedule_seeds))
           .empty())
    fields.fail("schedule_seeds", error);
  if (!(error = parse_seed_list(fields.text("fault_seeds"), true, space.fault_seeds)).empty())
    fields.fail("fault_seeds", error);
  space.run_flags = fields.text("run_flags");
  // They go into replay commands a person pastes into a shell: only the flags a swarm passes
  // on, with plain values.
  const std::string& flags = space.run_flags;
  size_t at = 0;
  while (at < flags.size()) {
    const size_t flag_end = std::min(flags.find(' ', at), flags.size());
    const std::string_view flag(flags.data() + at, flag_end - at);
    const size_t value_end = std::min(flags.find(' ', flag_end + 1), flags.size());
    const std::string_view value =
        flag_end < flags.size()
            ? std::string_view(flags).substr(flag_end + 1, value_end - flag_end - 1)
            : std::string_view();
    const bool known = flag == "--timeout" || flag == "--stack-kib" || flag == "--max-memory";
    if (!known || value.empty() ||
        value.find_first_not_of(
            "0123456789.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ%") !=
            std::string_view::npos) {
      fields.fail("run_flags",
                  "holds something else than --timeout, --stack-kib or --max-memory "
                  "with their values");
    }
    at = value_end + 1;
  }
  const std::optional<uint64_t> size = space.size();
  if (!size || *size != fields.number("combinations"))
    fields.fail("combinations", "is not files x fault seeds x schedule seeds");
  return space;
}

// The failures a shard lists, checked against its space and share.
void read_failures(const Fields& top, const ShardResults& shard, const std::string& name,
                   SwarmTally& tally) {
  const Json& failures = top.at("failures");
  if (!failures.is_array()) top.fail("failures", "is not a list");
  uint64_t failed = 0;
  std::map<size_t, uint64_t> failed_of_file;
  for (size_t i = 0; i < failures.size(); ++i) {
    const Fields f(failures[i], fmt::format("failures[{}]", i), name);
    const Fields first(f.at("first"), f.child("first"), name);
    DistinctFailure d;
    d.first = first.number("combination");
    if (d.first >= *shard.space.size() || d.first % shard.shard.count != shard.shard.index)
      first.fail("combination", "is not one of this shard's combinations");
    const Combination c = shard.space.at(d.first);
    const Json& faults_seed = first.at("faults_seed");
    const bool seeds_agree =
        first.number("schedule_seed") == c.schedule_seed &&
        (faults_seed.is_null() ? !c.faults_seed
                               : c.faults_seed && faults_seed.is_number_unsigned() &&
                                     faults_seed.get<uint64_t>() == *c.faults_seed);
    if (!seeds_agree) first.fail("", "names other seeds than its combination has");
    d.file = c.file;
    if (f.text("file") != shard.space.files[c.file].path)
      f.fail("file", "is not the file of its first combination");
    d.scenario = f.text("scenario");
    d.signature = f.text("signature");
    d.headline = f.text("headline");
    d.runs = f.number("runs");
    if (d.runs == 0 || d.runs > shard.shard.share_of(*shard.space.size()) - failed)
      f.fail("runs", "does not fit in the shard's share of runs");
    failed += d.runs;
    // No file's failures may outnumber its runs in the shard.
    const auto [begin, end] = shard.space.file_range(c.file);
    uint64_t& of_file = failed_of_file[c.file];
    if (d.runs > shard.shard.share_of(begin, end) - of_file)
      f.fail("runs", "is more than its file's runs in the shard");
    of_file += d.runs;
    const size_t before = tally.distinct();
    tally.add_failure(std::move(d));
    if (tally.distinct() == before) f.fail("signature", "is listed twice for one file");
  }
}

// nlohmann's text without its "[json.exception.parse_error.101] " tag, at most 200 characters.
std::string nlohmann_message(const Json::exception& e) {
  std::string text = e.what();
  if (const size_t at = text.find("] "); at != std::string::npos) text = text.substr(at + 2);
  return text.substr(0, 200);
}

}  // namespace

Ordered shard_json(const ShardResults& results) {
  return results_json("shard", results.version, results.space, results.tally, &results.shard);
}

Ordered swarm_report_json(const std::string& version, const SwarmSpace& space,
                          const SwarmTally& tally) {
  return results_json("report", version, space, tally, nullptr);
}

std::string swarm_json_text(const Ordered& results) {
  return results.dump(2, ' ', false, Ordered::error_handler_t::replace) + "\n";
}

ShardResults read_shard_json(const std::string& bytes, const std::string& name) {
  Json top;
  try {
    top = Json::parse(bytes, [&](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxDepth) {
        throw InputError(
            SourceLocation{name, 0, 0},
            fmt::format("not a meshsim swarm shard: nested deeper than {}", kMaxDepth));
      }
      return true;
    });
  } catch (const Json::parse_error& e) {
    throw InputError(SourceLocation{name, 0, 0},
                     fmt::format("not JSON (byte {}): {}", e.byte, nlohmann_message(e)));
  } catch (const Json::exception& e) {
    // A number past a double's range ("1e566") is nlohmann's out_of_range, not a parse error.
    throw InputError(SourceLocation{name, 0, 0},
                     fmt::format("not usable JSON: {}", nlohmann_message(e)));
  }
  const Fields fields(top, "", name);
  if (fields.text("meshsim_swarm") != "shard") {
    fields.fail("meshsim_swarm",
                "is not \"shard\" (merge takes the files `meshsim swarm --shard` writes)");
  }
  if (fields.number("schema") != kSchema)
    fields.fail("schema", fmt::format("is not {}, the one this meshsim reads", kSchema));
  ShardResults out;
  out.version = fields.text("meshsim");
  out.space = read_space(fields, name);
  const Fields shard(fields.at("shard"), "shard", name);
  out.shard.count = shard.number("count");
  out.shard.index = shard.number("index");
  if (out.shard.count == 0 || out.shard.index >= out.shard.count)
    shard.fail("", "is not shard I of N with 0 <= I < N");
  read_failures(fields, out, name, out.tally);
  const uint64_t share = out.shard.share_of(*out.space.size());
  const uint64_t runs = fields.number("runs");
  const uint64_t passed = fields.number("passed");
  if (runs != share) {
    fields.fail("runs", fmt::format("is {}, but the shard has {} combinations: it did not finish",
                                    runs, share));
  }
  if (passed > runs || passed + out.tally.failed() != runs ||
      fields.number("failed") != runs - passed)
    fields.fail("passed", "and the failures listed do not add up to the runs");
  out.tally.add_passes(passed);
  return out;
}

ShardResults merge_shards(const std::vector<NamedShard>& shards) {
  if (shards.empty()) throw InputError(SourceLocation{"merge", 0, 0}, "no shard files given");
  const NamedShard& model = shards.front();
  const uint64_t count = model.results.shard.count;
  std::map<uint64_t, const NamedShard*> by_index;
  ShardResults out{model.results.version, model.results.space, Shard{}, SwarmTally{}};
  for (const NamedShard& s : shards) {
    const ShardResults& r = s.results;
    const auto differs = [&](const std::string& what) {
      throw InputError(
          SourceLocation{s.name, 0, 0},
          fmt::format("not a shard of the swarm {} is from: {} differs", model.name, what));
    };
    if (r.version != model.results.version) {
      differs(fmt::format("the meshsim version ({} and {})", r.version, model.results.version));
    }
    if (r.space.files != model.results.space.files) differs("the scenario files or their bytes");
    if (r.space.schedule_seeds != model.results.space.schedule_seeds) differs("the schedule seeds");
    if (r.space.fault_seeds != model.results.space.fault_seeds) differs("the fault seeds");
    if (r.space.run_flags != model.results.space.run_flags) differs("the run flags");
    if (r.shard.count != count)
      differs(fmt::format("the shard count ({} and {})", r.shard.count, count));
    const auto [it, fresh] = by_index.emplace(r.shard.index, &s);
    if (!fresh) {
      throw InputError(
          SourceLocation{s.name, 0, 0},
          fmt::format("{} is shard {} of {} too", it->second->name, r.shard.index, count));
    }
    out.tally.merge(r.tally);
  }
  if (by_index.size() != count) {
    constexpr size_t kNamed = 10;
    std::vector<uint64_t> missing;  // the first few indices no file has
    uint64_t next = 0;
    for (auto it = by_index.begin(); missing.size() < kNamed && next < count;) {
      if (it != by_index.end() && it->first == next) {
        ++it;
      } else {
        missing.push_back(next);
      }
      ++next;
    }
    const uint64_t absent = count - by_index.size();
    throw InputError(
        SourceLocation{model.name, 0, 0},
        fmt::format("{} {} of {} {} missing ({} shard file{} given)",
                    absent == 1 ? "shard" : "shards", fmt::join(missing, ", "), count,
                    absent == 1 ? "is"
                                : fmt::format("are{}", absent > missing.size()
                                                           ? fmt::format(" ({} in all)", absent)
                                                           : ""),
                    shards.size(), shards.size() == 1 ? "" : "s"));
  }
  return out;
}

}  // namespace meshsim::sim
