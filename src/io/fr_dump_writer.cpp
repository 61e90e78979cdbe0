#include "src/io/fr_dump_writer.hpp"

#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "src/io/pickle_writer.hpp"

namespace meshsim {

namespace {

// pg_config gives a group's ranks as Python prints a list.
std::string ranks_text(const std::vector<int64_t>& ranks) {
  return fmt::format("[{}]", fmt::join(ranks, ", "));
}

// The pickle's dicts, lists and tuples, in the order PyTorch writes their keys.
class DumpPickler {
 public:
  std::string write(const FrDump& d) {
    begin_dict();
    key("version");
    text(d.version);
    key("pg_config");
    begin_dict();
    for (const auto& [name, g] : d.pg_config) {
      key(name);
      begin_dict();
      key("name");
      text(g.name);
      key("desc");
      text(g.desc);
      key("ranks");
      text(ranks_text(g.ranks));
      end_dict();
    }
    end_dict();
    key("comm_lib_version");
    text(d.comm_lib_version);
    key("pg_status");
    begin_dict();
    for (const auto& [id, s] : d.pg_status) {
      key(id);
      begin_dict();
      key("last_enqueued_collective");
      w_.integer(s.last_enqueued);
      key("last_started_collective");
      w_.integer(s.last_started);
      key("last_completed_collective");
      w_.integer(s.last_completed);
      end_dict();
    }
    end_dict();
    key("entries");
    begin_list();
    for (const FrEntry& e : d.entries) entry(e);
    end_list();
    end_dict();
    return w_.finish();
  }

 private:
  void entry(const FrEntry& e) {
    begin_dict();
    key("frames");
    begin_list();
    for (const FrFrame& f : e.frames) {
      begin_dict();
      key("name");
      text(f.name);
      key("filename");
      text(f.filename);
      key("line");
      w_.integer(f.line);
      end_dict();
    }
    end_list();
    key("record_id");
    w_.integer(e.record_id);
    key("pg_id");
    w_.integer(e.pg_id);
    key("process_group");
    w_.mark();
    text(e.pg_name);
    text(e.pg_desc);
    w_.tuple_from_mark();
    key("thread_name");
    text(e.thread_name);
    key("thread_id");
    text(e.thread_id);
    key("collective_seq_id");
    w_.integer(e.collective_seq_id);
    key("p2p_seq_id");
    w_.integer(e.p2p_seq_id);
    key("op_id");
    w_.integer(e.op_id);
    key("profiling_name");
    text(e.profiling_name);
    key("time_created_ns");
    time(e.time_created_ns);
    key("input_sizes");
    shapes(e.input_sizes);
    key("input_dtypes");
    strings(e.input_dtypes);
    key("output_sizes");
    shapes(e.output_sizes);
    key("output_dtypes");
    strings(e.output_dtypes);
    key("state");
    text(e.state);
    key("time_discovered_started_ns");
    time(e.time_started_ns);
    key("time_discovered_completed_ns");
    time(e.time_completed_ns);
    key("retired");
    w_.boolean(e.retired);
    key("timeout_ms");
    w_.integer(e.timeout_ms);
    key("is_p2p");
    w_.boolean(e.is_p2p);
    end_dict();
  }
  void time(const std::optional<int64_t>& t) {
    if (t)
      w_.integer(*t);
    else
      w_.none();
  }
  void shapes(const std::vector<std::vector<int64_t>>& sizes) {
    begin_list();
    for (const auto& s : sizes) {
      begin_list();
      for (int64_t d : s) w_.integer(d);
      end_list();
    }
    end_list();
  }
  void strings(const std::vector<std::string>& items) {
    begin_list();
    for (const std::string& s : items) text(s);
    end_list();
  }
  // Containers are filled from a mark: an empty one needs no mark, but one is harmless.
  void begin_dict() {
    w_.empty_dict();
    w_.mark();
  }
  void end_dict() { w_.set_items_from_mark(); }
  void begin_list() {
    w_.empty_list();
    w_.mark();
  }
  void end_list() { w_.append_from_mark(); }
  void key(std::string_view k) { text(k); }
  // A string, memoized: keys, names, dtypes, states and file names repeat in every entry, and a
  // dump of 100,000 entries must stay within what a reader takes (64 MiB).
  void text(std::string_view s) {
    if (const auto it = memo_.find(std::string(s)); it != memo_.end()) {
      w_.memo_get(it->second);
      return;
    }
    w_.string(s);
    const auto index = static_cast<uint32_t>(memo_.size());
    w_.memo_put(index);
    memo_.emplace(s, index);
  }

  PickleWriter w_;
  std::unordered_map<std::string, uint32_t> memo_;
};

nlohmann::json json_time(const std::optional<int64_t>& t) {
  return t.value_or(0);
}

}  // namespace

std::string fr_dump_pickle(const FrDump& dump) {
  return DumpPickler().write(dump);
}

std::string fr_dump_json(const FrDump& dump) {
  using nlohmann::json;
  json config = json::object();
  for (const auto& [name, g] : dump.pg_config)
    config[name] = {{"name", g.name}, {"desc", g.desc}, {"ranks", ranks_text(g.ranks)}};
  json status = json::object();
  for (const auto& [id, s] : dump.pg_status) {
    status[id] = {{"last_enqueued_collective", std::to_string(s.last_enqueued)},
                  {"last_started_collective", std::to_string(s.last_started)},
                  {"last_completed_collective", std::to_string(s.last_completed)}};
  }
  json entries = json::array();
  for (const FrEntry& e : dump.entries) {
    entries.push_back({{"record_id", e.record_id},
                       {"pg_id", e.pg_id},
                       {"process_group", {e.pg_name, e.pg_desc}},
                       {"thread_name", e.thread_name},
                       {"thread_id", e.thread_id},
                       {"collective_seq_id", e.collective_seq_id},
                       {"p2p_seq_id", e.p2p_seq_id},
                       {"op_id", e.op_id},
                       {"profiling_name", e.profiling_name},
                       {"time_created_ns", json_time(e.time_created_ns)},
                       {"input_sizes", e.input_sizes},
                       {"input_dtypes", e.input_dtypes},
                       {"output_sizes", e.output_sizes},
                       {"output_dtypes", e.output_dtypes},
                       {"state", e.state},
                       {"time_discovered_started_ns", json_time(e.time_started_ns)},
                       {"time_discovered_completed_ns", json_time(e.time_completed_ns)},
                       {"retired", e.retired},
                       {"timeout_ms", e.timeout_ms},
                       {"is_p2p", e.is_p2p}});
  }
  const json root = {
      {"version", dump.version},           {"comm_lib_version", dump.comm_lib_version},
      {"nccl_comm_state", json::object()}, {"pg_config", std::move(config)},
      {"pg_status", std::move(status)},    {"entries", std::move(entries)}};
  // Text that is not UTF-8 (a scenario path) is replaced, never a throw.
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace meshsim
