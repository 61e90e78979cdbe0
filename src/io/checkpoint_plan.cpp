#include "src/io/checkpoint_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "src/checked_math.hpp"
#include "src/dtensor/local_shard.hpp"
#include "src/error.hpp"
#include "src/io/tensor_digest.hpp"
#include "src/io/xxh3_stream.hpp"

namespace meshsim {

namespace {

// Past this many chunks, a name whose holders lay it out in different ways is not checked pair
// by pair for overlaps (the volume check still runs, and a load refuses overlapping chunks).
constexpr size_t kMaxPairwiseChunks = 4096;

bool intersect(const IndexRuns& a, const IndexRuns& b) {
  for (const IndexRuns::Run& x : a.runs()) {
    for (const IndexRuns::Run& y : b.runs()) {
      if (std::max(x.start, y.start) < std::min(x.stop, y.stop)) return true;
    }
  }
  return false;
}

bool overlap(const std::vector<IndexRuns>& a, const std::vector<IndexRuns>& b) {
  for (size_t d = 0; d < a.size(); ++d) {
    if (!intersect(a[d], b[d])) return false;
  }
  return true;
}

// The chunk as run bounds per dim: equal keys are the same chunk (DCP's MetadataIndex: name and
// offsets; runs also tell strided chunks apart).
std::vector<int64_t> chunk_key(const std::vector<IndexRuns>& indices) {
  std::vector<int64_t> key;
  for (const IndexRuns& d : indices) {
    key.push_back(static_cast<int64_t>(d.runs().size()));
    for (const IndexRuns::Run& r : d.runs()) key.insert(key.end(), {r.start, r.stop});
  }
  return key;
}

std::string describe(DType dtype, const std::vector<int64_t>& shape) {
  return fmt::format("{}[{}]", dtype_name(dtype), fmt::join(shape, ", "));
}

// "[0:4, 2:6]" for a block, "a strided chunk" otherwise.
std::string describe_chunk(const std::vector<IndexRuns>& indices,
                           const std::vector<int64_t>& shape) {
  if (chunk_volume(indices) == *checked_product(shape)) return "the whole tensor";
  std::vector<std::string> dims;
  for (const IndexRuns& d : indices) {
    if (d.runs().size() != 1) return "a strided chunk";
    dims.push_back(fmt::format("{}:{}", d.runs()[0].start, d.runs()[0].stop));
  }
  return fmt::format("elements [{}]", fmt::join(dims, ", "));
}

// The order in which CPython (3.11) iterates a set of small non-negative ints added in ascending
// order, as DCP's dedup builds its sets of plan indices (hash(i) == i): open addressing with up to
// 9 linear probes, then perturbed probing; 8 slots at first, grown to the smallest power of two
// above 4 times the fill once the table is 3/5 full. Ties between holders go to the first of them
// in this order, which is not always the lowest rank (of {3, 11}, 11 comes first).
std::vector<size_t> python_set_order(const std::vector<size_t>& ascending) {
  const auto insert = [](std::vector<int64_t>& table, size_t value) {
    const size_t mask = table.size() - 1;
    size_t perturb = value, i = value & mask;
    while (true) {
      const size_t probes = i + 9 <= mask ? 9 : 0;
      for (size_t j = i; j <= i + probes; ++j) {
        if (table[j] < 0) {
          table[j] = static_cast<int64_t>(value);
          return;
        }
      }
      perturb >>= 5;
      i = (i * 5 + 1 + perturb) & mask;
    }
  };
  std::vector<int64_t> table(8, -1);
  size_t fill = 0;
  for (size_t value : ascending) {
    insert(table, value);
    if (++fill * 5 < (table.size() - 1) * 3) continue;
    const size_t wanted = fill > 50000 ? fill * 2 : fill * 4;
    size_t size = 8;
    while (size <= wanted) size <<= 1;
    std::vector<int64_t> old(size, -1);
    old.swap(table);
    for (int64_t v : old) {
      if (v >= 0) insert(table, static_cast<size_t>(v));
    }
  }
  std::vector<size_t> out;
  for (int64_t v : table) {
    if (v >= 0) out.push_back(static_cast<size_t>(v));
  }
  return out;
}

struct Holder {
  size_t plan;  // index into the plans
  const SaveItem* item;
};

// A chunk and every rank that holds it, in rank order.
struct SharedChunk {
  std::vector<Holder> holders;
  size_t writer = 0;  // index into holders
};

}  // namespace

LocalSavePlan plan_local_save(int64_t rank, std::span<const StateDictEntry> entries) {
  LocalSavePlan plan{rank, rank, {}};
  std::set<std::string> names;
  for (const StateDictEntry& e : entries) {
    if (!names.insert(e.name).second)
      throw runtime_error(fmt::format("'{}' is in the state dict twice", e.name));
    const Tensor& local = e.dtensor != nullptr ? e.dtensor->local() : *e.tensor;
    SaveItem item;
    item.name = e.name;
    item.dtype = local.dtype();
    if (e.dtensor != nullptr) {
      const DTensorSpec& spec = e.dtensor->spec();
      for (const Placement& p : spec.placements) {
        if (std::holds_alternative<Partial>(p)) {
          throw runtime_error(
              fmt::format("'{}' is Partial on a mesh dim: reduce it (redistribute to "
                          "Replicate) before saving",
                          e.name));
        }
      }
      if (!e.dtensor->participates()) continue;
      item.shape = spec.shape;
      item.requires_grad = e.dtensor->requires_grad();
      item.placements = spec.placements;
      item.mesh_shape = spec.mesh.shape();
      item.indices =
          owned_indices(spec.shape, item.mesh_shape, *spec.mesh.coordinate(), spec.placements);
    } else {
      item.shape.assign(local.shape().begin(), local.shape().end());
      for (int64_t n : item.shape) item.indices.push_back(IndexRuns::range(n));
    }
    // Empty tensors and shards stay in the plan, as in DCP: the name is in the metadata (a load
    // finds it), and the chunk's writer is charged its tensor's bytes like any other.
    if (local.is_meta()) {
      throw runtime_error(fmt::format("'{}' is a meta tensor: there is nothing to save", e.name));
    }
    item.digest = tensor_digest(local);
    item.tensor_bytes = *checked_product(item.shape) * static_cast<int64_t>(dtype_size(item.dtype));
    item.data = &local;
    plan.items.push_back(std::move(item));
  }
  return plan;
}

GlobalSavePlan plan_global_save(std::span<const LocalSavePlan> plans) {
  // Chunks in the order they first appear, with their holders.
  std::vector<SharedChunk> chunks;
  std::map<std::pair<std::string, std::vector<int64_t>>, size_t> chunk_of;
  // The first holder of each name, against which the others' shapes and dtypes are checked.
  std::map<std::string, Holder> first_of;
  for (size_t p = 0; p < plans.size(); ++p) {
    for (const SaveItem& item : plans[p].items) {
      const auto [first, is_first] = first_of.emplace(item.name, Holder{p, &item});
      const SaveItem& seen = *first->second.item;
      if (!is_first && (seen.dtype != item.dtype || seen.shape != item.shape)) {
        throw runtime_error(fmt::format(
            "rank {} saves '{}' as {} and rank {} as {}: one name is one tensor across ranks",
            plans[first->second.plan].global_rank, item.name, describe(seen.dtype, seen.shape),
            plans[p].global_rank, describe(item.dtype, item.shape)));
      }
      const auto [at, added] =
          chunk_of.emplace(std::pair{item.name, chunk_key(item.indices)}, chunks.size());
      if (added) chunks.emplace_back();
      chunks[at->second].holders.push_back({p, &item});
    }
  }
  // One writer per chunk: the holder given the fewest bytes so far (DCP's load balancing, which
  // counts each item as its whole tensor's bytes), the first in Python's set order on a tie.
  std::vector<int64_t> planned_bytes(plans.size(), 0);
  GlobalSavePlan out;
  std::set<std::string> warned;
  for (SharedChunk& c : chunks) {
    int64_t least = INT64_MAX;
    size_t tied = 0;
    for (size_t h = 0; h < c.holders.size(); ++h) {
      const int64_t bytes = planned_bytes[c.holders[h].plan];
      if (bytes < least) {
        least = bytes;
        c.writer = h;
        tied = 1;
      } else if (bytes == least) {
        ++tied;
      }
    }
    if (tied > 1) {
      std::vector<size_t> ascending;
      for (const Holder& h : c.holders) ascending.push_back(h.plan);
      for (size_t p : python_set_order(ascending)) {
        if (planned_bytes[p] != least) continue;
        c.writer = static_cast<size_t>(std::find(ascending.begin(), ascending.end(), p) -
                                       ascending.begin());
        break;
      }
    }
    // An empty tensor counts as one byte (DCP adds `tensor_storage_size() or 1`).
    const Holder& writer = c.holders[c.writer];
    planned_bytes[writer.plan] =
        checked_add(planned_bytes[writer.plan], std::max<int64_t>(writer.item->tensor_bytes, 1))
            .value_or(INT64_MAX);
    for (const Holder& h : c.holders) {
      const SaveItem& item = *h.item;
      if (item.digest == c.holders.front().item->digest || !warned.insert(item.name).second)
        continue;
      out.warnings.push_back(fmt::format(
          "ranks {} and {} save '{}' with different values at one place ({}): the checkpoint "
          "keeps one copy (rank {}'s, the rank Distributed Checkpoint picks to write it), and "
          "every rank that loads '{}' gets it",
          plans[c.holders.front().plan].global_rank, plans[h.plan].global_rank, item.name,
          describe_chunk(item.indices, item.shape), plans[writer.plan].global_rank, item.name));
    }
  }
  Xxh3Stream values;
  for (const SharedChunk& c : chunks)
    values.add(&c.holders[c.writer].item->digest, sizeof(uint64_t));
  out.values_digest = values.digest();
  // The metadata lists the chunks by writer, in rank order, as DCP builds it from the deduplicated
  // plans.
  std::vector<std::vector<const SharedChunk*>> written_by(plans.size());
  for (const SharedChunk& c : chunks) written_by[c.holders[c.writer].plan].push_back(&c);
  std::map<std::string, size_t> tensor_of;
  struct Layouts {
    bool uniform = true;  // every chunk from one layout: disjoint or equal by construction
  };
  std::vector<Layouts> layouts;
  out.writes.resize(plans.size());
  for (size_t p = 0; p < plans.size(); ++p) {
    for (const SharedChunk* c : written_by[p]) {
      const SaveItem& item = *c->holders[c->writer].item;
      const auto [at, added] = tensor_of.emplace(item.name, out.metadata.tensors.size());
      if (added) {
        out.metadata.tensors.push_back(
            {item.name, item.dtype, item.shape, item.placements, item.mesh_shape, {}});
        layouts.push_back({!item.placements.empty()});
      }
      CheckpointTensor& t = out.metadata.tensors[at->second];
      if (item.placements != t.placements || item.mesh_shape != t.mesh_shape)
        layouts[at->second].uniform = false;
      t.chunks.push_back({plans[p].rank, item.indices});
      out.writes[p].push_back(
          {static_cast<size_t>(&item - plans[p].items.data()), at->second, t.chunks.size() - 1});
    }
    std::sort(out.writes[p].begin(), out.writes[p].end(),
              [](const PlannedWrite& a, const PlannedWrite& b) { return a.item < b.item; });
  }
  // DCP's validation of the global plan: chunks that cover each tensor once.
  const auto global_rank = [&](int64_t file_rank) {
    for (const LocalSavePlan& plan : plans) {
      if (plan.rank == file_rank) return plan.global_rank;
    }
    return file_rank;
  };
  for (size_t i = 0; i < out.metadata.tensors.size(); ++i) {
    const CheckpointTensor& t = out.metadata.tensors[i];
    int64_t held = 0;
    for (const CheckpointChunk& c : t.chunks)
      held = checked_add(held, chunk_volume(c.indices)).value_or(INT64_MAX);
    const auto invalid = [&](const std::string& why) {
      throw value_error(
          fmt::format("Failed to validate global plan: the chunks saved for '{}' ({}) {}", t.name,
                      describe(t.dtype, t.shape), why));
    };
    if (!layouts[i].uniform && t.chunks.size() <= kMaxPairwiseChunks) {
      for (size_t a = 0; a < t.chunks.size(); ++a) {
        for (size_t b = a + 1; b < t.chunks.size(); ++b) {
          if (overlap(t.chunks[a].indices, t.chunks[b].indices)) {
            invalid(fmt::format(
                "overlap: ranks {} and {} hold parts of it laid out in different "
                "ways",
                global_rank(t.chunks[a].file_rank), global_rank(t.chunks[b].file_rank)));
          }
        }
      }
    }
    const int64_t numel = *checked_product(t.shape);
    if (held != numel) {
      invalid(
          fmt::format("hold {} of its {} elements: a rank that holds part of it left it out "
                      "of its state dict",
                      held, numel));
    }
  }
  return out;
}

}  // namespace meshsim
